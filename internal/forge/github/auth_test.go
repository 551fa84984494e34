package github

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jwt "github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testAppID = 42

// appServer is a test server speaking the GitHub App endpoints: installation lookup for the org
// "acme" (id 7) and the user "alice" (id 8), and token minting.
type appServer struct {
	*testServer
	key    *rsa.PrivateKey
	pem    []byte
	mints  atomic.Int64
	mu     sync.Mutex
	issuer []string // iss claims of verified JWTs
}

func newAppServer(t *testing.T, clock *fakeClock) *appServer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	a := &appServer{
		testServer: newTestServer(t, clock),
		key:        key,
		pem:        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}
	a.mux.HandleFunc("GET /orgs/acme/installation", a.requireJWT(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 7})
	}))
	a.mux.HandleFunc("GET /users/alice/installation", a.requireJWT(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 8})
	}))
	a.mux.HandleFunc("GET /orgs/{org}/installation", a.requireJWT(t, notFound))
	a.mux.HandleFunc("GET /users/{user}/installation", a.requireJWT(t, notFound))
	a.mux.HandleFunc("POST /app/installations/{id}/access_tokens", a.requireJWT(t, func(w http.ResponseWriter, r *http.Request) {
		n := a.mints.Add(1)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token":      "ghs_" + r.PathValue("id") + "_" + string(rune('0'+n)),
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	}))
	return a
}

func notFound(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"message":"Not Found"}`))
}

// requireJWT verifies the app JWT (RS256, signed by the app key) and records its issuer.
func (a *appServer) requireJWT(t *testing.T, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !assert.True(t, ok, "%s %s: app endpoints need a JWT", r.Method, r.URL.Path) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var claims jwt.RegisteredClaims
		_, err := jwt.ParseWithClaims(raw, &claims, func(tok *jwt.Token) (any, error) {
			assert.Equal(t, "RS256", tok.Method.Alg())
			return &a.key.PublicKey, nil
		})
		if !assert.NoError(t, err, "JWT verifies with the app's public key") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		a.mu.Lock()
		a.issuer = append(a.issuer, claims.Issuer)
		a.mu.Unlock()
		next(w, r)
	}
}

func (a *appServer) issuers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issuer...)
}

func TestAppAuth(t *testing.T) {
	t.Parallel()
	a := newAppServer(t, nil)
	var auths []string
	var mu sync.Mutex
	a.mux.HandleFunc("GET /repos/acme/{repo}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"name": r.PathValue("repo")})
	})
	var logs bytes.Buffer
	c, err := New(context.Background(), Config{
		APIURL: a.apiURL(), AppID: testAppID, PrivateKey: a.pem, Owner: "acme",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	assert.Equal(t, int64(7), c.InstallationID())

	for _, name := range []string{"cluster-a", "cluster-b", "cluster-c"} {
		repo, _, err := c.API().Repositories.Get(context.Background(), "acme", name)
		require.NoError(t, err, name)
		assert.Equal(t, name, repo.GetName())
	}
	assert.Equal(t, int64(1), a.mints.Load(), "the installation token is minted once and cached")
	assert.Equal(t, []string{"token ghs_7_1", "token ghs_7_1", "token ghs_7_1"}, auths)
	iss := a.issuers()
	require.Len(t, iss, 2, "lookup and mint are made as the app")
	for _, i := range iss {
		assert.Equal(t, "42", i, "JWT iss is the app id")
	}
	assert.Equal(t, int64(3), c.Stats().Requests.Reads, "installation requests counted in the client")
	assert.NotContains(t, logs.String(), "ghs_", "tokens are never logged")
	assert.NotContains(t, logs.String(), "PRIVATE KEY")
}

func TestAppAuthReadOnlyStillMints(t *testing.T) {
	t.Parallel()
	a := newAppServer(t, nil)
	a.mux.HandleFunc("GET /repos/acme/r", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	c, err := New(context.Background(), Config{
		APIURL: a.apiURL(), AppID: testAppID, PrivateKey: a.pem, Owner: "acme", ReadOnly: true,
	})
	require.NoError(t, err)
	_, _, err = c.API().Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err, "token minting (a POST) is not blocked by the read-only guard")
	assert.Equal(t, int64(1), a.mints.Load())

	_, _, err = c.API().Git.CreateTree(context.Background(), "acme", "r", "", nil)
	assert.ErrorIs(t, err, ErrReadOnly)
}

func TestAppInstallationLookup(t *testing.T) {
	t.Parallel()
	a := newAppServer(t, nil)
	app, err := NewApp(AppConfig{APIURL: a.apiURL(), AppID: testAppID, PrivateKey: a.pem})
	require.NoError(t, err)

	id, err := app.InstallationID(context.Background(), "alice")
	require.NoError(t, err)
	assert.Equal(t, int64(8), id, "falls back to the user installation")
	id, err = app.InstallationID(context.Background(), "Alice")
	require.NoError(t, err)
	assert.Equal(t, int64(8), id)
	assert.Len(t, a.requests(), 2, "the lookup is cached (owners are case-insensitive)")

	_, err = app.InstallationID(context.Background(), "bob")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "bob")
	assert.Equal(t, int64(4), app.Stats().Reads)

	// Two clients of different owners share the app.
	ca, err := New(context.Background(), Config{APIURL: a.apiURL(), App: app, Owner: "acme"})
	require.NoError(t, err)
	cb, err := New(context.Background(), Config{APIURL: a.apiURL(), App: app, Owner: "alice"})
	require.NoError(t, err)
	assert.Equal(t, int64(7), ca.InstallationID())
	assert.Equal(t, int64(8), cb.InstallationID())
}

func TestAppFreshTokenRetried(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	a := newAppServer(t, clock)
	var calls atomic.Int64
	a.mux.HandleFunc("GET /repos/acme/r", func(w http.ResponseWriter, r *http.Request) {
		if n := calls.Add(1); n == 1 || n == 3 {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"message":"Bad credentials"}`))
			return
		}
		_, _ = w.Write([]byte(`{"name":"r"}`))
	})
	c, err := New(context.Background(), Config{
		APIURL: a.apiURL(), AppID: testAppID, PrivateKey: a.pem, Owner: "acme", Budget: BudgetConfig{Clock: clock},
	})
	require.NoError(t, err)
	_, _, err = c.API().Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err, "the 401 of a just-minted token is retried")
	assert.Equal(t, int64(2), calls.Load())
	assert.Equal(t, []time.Duration{freshTokenDelay}, clock.slept())

	// Once the token is no longer fresh, a 401 is an answer, not replication lag.
	require.NoError(t, clock.Sleep(context.Background(), time.Minute))
	_, _, err = c.API().Repositories.Get(context.Background(), "acme", "r")
	require.Error(t, err)
	assert.Equal(t, Terminal, Classify(err))
	assert.Equal(t, int64(3), calls.Load())
	assert.Equal(t, int64(1), a.mints.Load())
}

func TestNewAppRejectsBadKey(t *testing.T) {
	t.Parallel()
	_, err := NewApp(AppConfig{AppID: 1, PrivateKey: []byte("-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n")})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "c2VjcmV0")
	_, err = NewApp(AppConfig{AppID: 0, PrivateKey: []byte("x")})
	assert.Error(t, err)
}

func TestTokenTransport(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {})
	rt := NewTokenTransport(http.DefaultTransport, "s3cret")
	req, _ := http.NewRequest("GET", s.URL+apiPrefix+"/user", nil)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	_ = readAll(t, resp)
	assert.Equal(t, "token s3cret", s.requests()[0].Header.Get("Authorization"))
	assert.Empty(t, req.Header.Get("Authorization"), "the caller's request is not modified")
}
