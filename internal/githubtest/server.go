package githubtest

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/fleetbot-io/fleetbot/internal/gitloose"
)

const apiPrefix = "/api/v3"

// Server is a stateful fake GitHub. Its REST API is mounted under /api/v3 (as on GitHub
// Enterprise) and git smart HTTP under /{owner}/{repo}.git. All state is guarded by one mutex.
type Server struct {
	// URL is the server's base URL, e.g. "http://127.0.0.1:34567" (no trailing slash).
	URL string

	tb testing.TB // set by NewServer: helpers fail the test on error

	cfg   config
	clock *clock
	dir   string // state directory: repos/ (bare git) and state.json
	save  bool   // persist state.json after writes
	hs    *httptest.Server
	// queries are the GraphQL documents parsed so far (parseGraphQL).
	queries *lru.Cache[string, parsedQuery]

	apiMux *http.ServeMux
	// restPatterns are the REST routes registered on apiMux ("GET /repos/{owner}/{repo}").
	restPatterns []string
	gitMux       *http.ServeMux

	mu     sync.Mutex // guards st, app keys and every git repository on disk
	st     *state
	events []pendingEvent
	sizes  map[string]sizeEntry // repo sizes by git dir, see repoSizeLocked
	loose  *gitloose.Writer     // writes every repository's new git objects
	gits   map[string]*gitRepo  // repositories opened by the REST side, by git dir
	// refMoves is every ref move, oldest first (reflog.go).
	refMoves []RefMove

	ctlMu    sync.Mutex // guards the request log, faults, limit buckets, in-flight count
	reqlog   []Request
	faults   []*fault
	buckets  map[string]*bucket
	inflight int

	hookMu       sync.Mutex // guards deliveries and nextDelivery (deliveries.go)
	deliveries   []*HookDelivery
	nextDelivery int64

	outMu      sync.Mutex     // guards outbox and delivering
	outbox     []pendingEvent // webhooks to deliver, in order
	delivering bool           // a deliverLoop is running

	// changes wakes the waiters of Changed.
	changes changes

	hooks    sync.WaitGroup
	closeCtx context.Context
	cancel   context.CancelFunc
}

// NewServer starts a fake GitHub on a local port for the duration of a test, with its state
// in t.TempDir(). It is closed by t.Cleanup.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	probe := defaultConfig()
	for _, o := range opts {
		o(&probe)
	}
	if probe.appKey == nil && probe.appPub == nil {
		// One App key for every test server of a test binary: generating a 2048-bit RSA
		// key costs about a CPU-second under -race. A test that needs a key the server does
		// not know makes its own.
		key, err := testAppKey()
		if err != nil {
			t.Fatalf("starting fake github: %v", err)
		}
		opts = append([]Option{WithAppKey(key)}, opts...)
	}
	if !probe.noSpec && probe.spec == nil {
		opt, report := specOption(t, probe.ghes)
		// Registered before Close: cleanups run last-in first-out, so the violations are
		// reported after the last request has been answered.
		t.Cleanup(report)
		opts = append([]Option{opt}, opts...)
	}
	s, err := New(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("starting fake github: %v", err)
	}
	s.save = false
	s.tb = t
	if s.cfg.tls {
		s.hs = httptest.NewTLSServer(s)
	} else {
		s.hs = httptest.NewServer(s)
	}
	s.URL = s.hs.URL
	t.Cleanup(s.Close)
	return s
}

// New builds a fake GitHub keeping its state in dir (bare repos under dir/repos, metadata in
// dir/state.json, reloaded if present). It does not listen: serve it with an http.Server and
// set URL, or use NewServer in tests.
func New(dir string, opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.appPerms == nil && !cfg.noManifest {
		// The App's permissions and events are those of the repository's manifest, for the
		// in-test server and the program alike: a permission missing there fails the test
		// (or the demo) that needs it.
		if path, err := RepoAppManifestPath(); err == nil {
			m, err := LoadAppManifest(path)
			if err != nil {
				return nil, fmt.Errorf("starting fake github: %w", err)
			}
			WithAppManifest(m)(&cfg)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "repos"), 0o755); err != nil {
		return nil, fmt.Errorf("creating fake github state dir: %w", err)
	}
	st, err := loadState(dir)
	if err != nil {
		return nil, err
	}
	// The fake's repositories are scratch: objects stored uncompressed cost no deflate CPU.
	loose, err := gitloose.NewWriterLevel(zlib.NoCompression)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	queries, _ := lru.New[string, parsedQuery](queryCacheSize) // fails only for a size <= 0
	s := &Server{
		queries:  queries,
		cfg:      cfg,
		clock:    newClock(cfg.start, cfg.timeScale, cfg.manualClock),
		dir:      dir,
		save:     true,
		st:       st,
		buckets:  map[string]*bucket{},
		loose:    loose,
		closeCtx: ctx,
		cancel:   cancel,
	}
	s.mu.Lock()
	for token, login := range cfg.users {
		s.ensureAccountLocked(login, "User")
		st.Tokens[token] = &accessToken{Token: token, Login: login}
	}
	s.ensureAccountLocked(s.botLogin(), "Bot")
	s.mu.Unlock()
	s.routes()
	return s, nil
}

// Close stops the test server (if any) and waits for webhook deliveries in flight.
func (s *Server) Close() {
	s.cancel()
	if s.hs != nil {
		s.hs.Close()
	}
	s.hooks.Wait()
}

// CertPEM is the PEM certificate of a server started by NewServer with WithTLS, which its
// clients trust as their CA (it signs itself); nil without TLS.
func (s *Server) CertPEM() []byte {
	if s.hs == nil || s.hs.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.hs.Certificate().Raw})
}

// APIURL is the REST base URL with a trailing slash, the value for GITHUB_API_URL and
// go-github's WithEnterpriseURLs.
func (s *Server) APIURL() string { return s.URL + apiPrefix + "/" }

// ServeHTTP applies faults, authentication, limits, ETags and logging around the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := s.clock.Now()
	isAPI := r.URL.Path == apiPrefix || strings.HasPrefix(r.URL.Path, apiPrefix+"/") || r.URL.Path == "/api/graphql"
	mux := s.gitMux
	if isAPI {
		mux = s.apiMux
	}
	_, pattern := mux.Handler(r)
	route := strings.Replace(pattern, " "+apiPrefix, " ", 1)
	entry := Request{Method: r.Method, Path: r.URL.Path, Route: route, Class: classify(r.Method, route), Time: now,
		Repo: repoOfPath(route, r.URL.Path)}
	var mutations []string // the fields a GraphQL mutation selects on Mutation
	if route == "POST /api/graphql" && r.Body != nil {
		// A GraphQL query is a read (1 point), a mutation a write (5 points).
		body, err := io.ReadAll(io.LimitReader(r.Body, maxGraphQLBody))
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		read := false
		if err == nil {
			read, mutations = s.graphQLOperation(body)
		}
		if read {
			entry.Class = Read
		}
	}

	if !s.enter() {
		defer s.leave()
		entry.Status = s.secondaryStatus()
		s.record(entry)
		writeJSON(w, s.secondaryStatus(), apiError{
			Message:          "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			DocumentationURL: secondaryDocURL,
		})
		return
	}
	defer s.leave()

	lose := false
	if spec, ok := s.matchFault(r.Method, r.URL.Path, route, mutations); ok {
		lose = spec.LoseResponse
		if spec.Latency > 0 {
			select {
			case <-time.After(spec.Latency):
			case <-r.Context().Done():
			}
		}
		switch {
		case spec.Drop:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			} else {
				writeError(w, http.StatusBadGateway, "connection dropped by fault")
			}
			s.record(entry)
			return
		case spec.Status != 0:
			msg := spec.Message
			if msg == "" {
				msg = http.StatusText(spec.Status)
			}
			entry.Status = spec.Status
			s.record(entry)
			writeError(w, spec.Status, msg)
			return
		}
	}

	if isAPI && refuseWithoutUserAgent(w, r) {
		entry.Status = http.StatusForbidden
		s.record(entry)
		return
	}
	p, authErr := s.authenticate(r, isAPI, route)
	entry.Principal = p.login
	if authErr != nil {
		if !isAPI {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		}
		entry.Status = authErr.status
		s.record(entry)
		writeError(w, authErr.status, authErr.message)
		return
	}
	if p.kind == "installation" && outOfScope(p, r.URL.Path, isAPI) {
		// A repository the token was not narrowed to: as if it did not exist.
		entry.Status = http.StatusNotFound
		s.record(entry)
		writeErr(w, errNotFound)
		return
	}
	if perms := s.tokenPermissions(p); p.kind == "installation" && perms != nil {
		key, ok, known := permissionKey(r, route, entry.Class == Read), true, true
		for _, m := range mutations {
			// Each mutation needs its own permission (updateRefs contents, auto-merge pull
			// requests); a document that selects none is refused when it runs.
			if key = permissionKey(r, route, false) + " " + m; !permittedOK(perms, key, &known) {
				ok = false
				break
			}
		}
		if len(mutations) == 0 {
			ok, known = permitted(perms, key)
		}
		if !ok {
			entry.Status = http.StatusForbidden
			s.record(entry)
			if !known {
				writeError(w, http.StatusForbidden, "fake github: no permission is documented for "+key+" (add it to routePermissions)")
				return
			}
			writeJSON(w, http.StatusForbidden, apiError{Message: errNotAccessible.message,
				DocumentationURL: "https://docs.github.com/rest", Status: "403"})
			return
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
	// A GraphQL mutation names the repository it writes by node id: its resolver says which.
	var mutated string
	r = r.WithContext(context.WithValue(r.Context(), mutatedRepoKey{}, &mutated))

	free := route == "GET /rate_limit"
	// A GraphQL call spends its own budget, in points (graphqlbudget.go), not the REST one.
	graphQL := route == "POST /api/graphql"
	var ri rateInfo
	doneMutating := func() {}
	if !free {
		var rej *limitRejection
		if !graphQL {
			ri, rej = s.admit(p.bucket, entry.Class)
		}
		if rej == nil {
			var release func()
			release, rej = s.admitSecondary(p.bucket, route, entry.Class)
			if release != nil {
				doneMutating = release
				defer release()
			}
		}
		if rej != nil {
			if graphQL {
				rate := s.spendGraphQL(p.bucket, graphQLCost{}, true)
				if !rej.keepRate {
					rate.remaining = 0
				}
				s.setGraphQLRateHeaders(w.Header(), rate)
			} else {
				s.setRateHeaders(w.Header(), ri, !rej.keepRate)
			}
			if rej.retryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(rej.retryAfter)))
				entry.RetryAfter = time.Duration(retryAfterSeconds(rej.retryAfter)) * time.Second
			}
			entry.Status = rej.status
			s.record(entry)
			writeJSON(w, rej.status, apiError{Message: rej.message, DocumentationURL: rej.docURL})
			return
		}
	}

	if !isAPI {
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		s.charge(p.bucket)
		entry.Status = rec.status
		s.record(entry)
		s.flushEvents()
		return
	}

	var reqBody []byte
	checkSpec := s.cfg.spec != nil && specCheckable(r.URL.Path)
	if checkSpec && r.Body != nil {
		var err error
		reqBody, err = io.ReadAll(io.LimitReader(r.Body, 100<<20))
		// A client that went away mid-request (a stopped serve, a cancelled context) sent a
		// cut body: the handler answers it as GitHub answers broken JSON, and the exchange is
		// not one the description can judge (no client sent that body on purpose).
		checkSpec = err == nil
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	buf := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
	mux.ServeHTTP(buf, r)
	if mutated != "" {
		entry.Repo = mutated
	}
	s.flushEvents()
	h := w.Header()
	for k, v := range buf.header {
		h[k] = v
	}
	status := buf.status
	body := buf.body.Bytes()
	// GitHub's responses vary by credentials and media type, and so do its ETags: one taken
	// with a token does not validate a request made with another (an installation token
	// rotates hourly).
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if r.Method == http.MethodGet && status == http.StatusOK {
		etag := responseETag(r.Header.Get("Authorization"), r.Header.Get("Accept"), body)
		h.Set("ETag", etag)
		if etagMatch(r.Header.Get("If-None-Match"), etag) {
			status, body = http.StatusNotModified, nil
		}
	}
	switch {
	case graphQL: // its handler set the GraphQL budget's headers
	case free:
		ri = s.rate(p.bucket)
		s.setRateHeaders(h, ri, false)
	case status != http.StatusNotModified:
		ri = s.charge(p.bucket)
		s.setRateHeaders(h, ri, false)
	default:
		s.setRateHeaders(h, ri, false)
	}
	if p.tokenExpiry != "" {
		h.Set("Github-Authentication-Token-Expiration", p.tokenExpiry)
	}
	h.Set("X-Github-Request-Id", fmt.Sprintf("FAKE:%d", now.UnixNano()))
	h.Set("X-Github-Api-Version-Selected", "2022-11-28")
	if lose {
		s.record(entry) // Status 0: no answer left
		doneMutating()
		dropConnection(w)
		return
	}
	if checkSpec {
		s.checkSpec(r, reqBody, status, h, body)
	}
	// Logged before the answer leaves: a client that has read it must find it in the log.
	entry.Status = status
	s.record(entry)
	doneMutating()
	w.WriteHeader(status)
	if status != http.StatusNotModified && status != http.StatusNoContent {
		_, _ = w.Write(body)
	}
}

// responseETag is a weak validator of a body as one credential and media type saw it.
func responseETag(authorization, accept string, body []byte) string {
	hsh := sha256.New()
	for _, part := range [][]byte{[]byte(authorization), {0}, []byte(accept), {0}, body} {
		hsh.Write(part)
	}
	return `W/"` + hex.EncodeToString(hsh.Sum(nil)[:16]) + `"`
}

func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	strip := func(v string) string { return strings.TrimPrefix(strings.TrimSpace(v), "W/") }
	for _, v := range strings.Split(header, ",") {
		if strings.TrimSpace(v) == "*" || strip(v) == strip(etag) {
			return true
		}
	}
	return false
}

// bufferedWriter collects an API response so ETags and rate headers can be set after the handler.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(status int) {
	if !b.wrote {
		b.status, b.wrote = status, true
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}

// statusWriter remembers the status of a streamed response (git smart HTTP).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// apiError is GitHub's error body.
type apiError struct {
	Message string `json:"message"`
	// Errors is a []fieldError, or a []string where GitHub's description says an operation's
	// errors are simple (validation-error-simple).
	Errors           any    `json:"errors,omitempty"`
	DocumentationURL string `json:"documentation_url,omitempty"`
	Status           string `json:"status,omitempty"`
}

type fieldError struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code,omitempty"`
	Message  string `json:"message,omitempty"`
}

// httpError is an error a handler turns into a GitHub error response.
type httpError struct {
	status  int
	message string
	errors  []fieldError
	// simple are errors GitHub words as plain strings (validation-error-simple).
	simple []string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s", e.status, e.message) }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, message: fmt.Sprintf(format, args...)}
}

var (
	errNotFound   = &httpError{status: http.StatusNotFound, message: "Not Found"}
	errEmptyRepo  = &httpError{status: http.StatusConflict, message: "Git Repository is empty."}
	errArchived   = &httpError{status: http.StatusForbidden, message: "Repository was archived so is read-only."}
	errBadRequest = &httpError{status: http.StatusBadRequest, message: "Problems parsing JSON"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if v == nil {
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Message: msg, DocumentationURL: "https://docs.github.com/rest", Status: strconv.Itoa(status)})
}

// writeErr writes err as GitHub does: an *httpError as itself, anything else as a 500.
func writeErr(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		var errs any
		switch {
		case he.simple != nil:
			errs = he.simple
		case he.errors != nil:
			errs = he.errors
		}
		writeJSON(w, he.status, apiError{Message: he.message, Errors: errs,
			DocumentationURL: "https://docs.github.com/rest", Status: strconv.Itoa(he.status)})
		return
	}
	writeError(w, http.StatusInternalServerError, "fake github: "+err.Error())
}

// decodeBody decodes a JSON request body; an empty body is allowed.
func decodeBody(r *http.Request, v any) error {
	data, err := readAll(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return errBadRequest
	}
	return nil
}

func readAll(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, 100<<20)); err != nil {
		return nil, errorf(http.StatusBadRequest, "reading body: %v", err)
	}
	return buf.Bytes(), nil
}
