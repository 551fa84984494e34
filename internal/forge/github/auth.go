package github

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	jwt "github.com/golang-jwt/jwt/v4"
	gh "github.com/google/go-github/v62/github"
)

// TokenTransport authenticates every request with a personal access (or Actions) token as
// "Authorization: token X". The token never appears in logs or errors.
type TokenTransport struct {
	next  http.RoundTripper
	token string
}

// NewTokenTransport returns a TokenTransport sending token.
func NewTokenTransport(next http.RoundTripper, token string) *TokenTransport {
	return &TokenTransport{next: next, token: token}
}

// RoundTrip implements http.RoundTripper.
func (t *TokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "token "+t.token)
	return t.next.RoundTrip(r)
}

// freshTokenRetries and freshTokenWindow: a just-minted installation token can be refused for a
// moment while it replicates inside GitHub; retry for a few seconds before failing.
const (
	freshTokenRetries = 3
	freshTokenDelay   = 500 * time.Millisecond
	freshTokenWindow  = 10 * time.Second
)

// tokenSource is what installationTransport needs from ghinstallation.Transport.
type tokenSource interface {
	Token(ctx context.Context) (string, error)
}

// installationTransport authenticates as a GitHub App installation. It uses ghinstallation only
// as a token source (minting and caching the hour-long token on the app's own transport), so
// that API requests go through this client's chain while token minting does not: minting is a
// POST and must work behind ReadOnlyTransport.
type installationTransport struct {
	next  http.RoundTripper
	src   tokenSource
	id    int64
	clock Clock
	log   *slog.Logger

	mu       sync.Mutex
	lastHash [sha256.Size]byte // of the last token seen; the token itself is not kept here
	mintedAt time.Time
}

func (t *installationTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, err := t.src.Token(ctx)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("minting a token for GitHub App installation %d: %w", t.id, err)
	}
	fresh := t.observe(tok)
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 0; ; attempt++ {
		r, err := replay(req, attempt)
		if err != nil {
			return nil, err
		}
		if attempt == 0 {
			r = r.Clone(ctx) // never modify the caller's request
		}
		r.Header.Set("Authorization", "token "+tok)
		resp, err := t.next.RoundTrip(r)
		if err != nil || !fresh || !replayable || attempt >= freshTokenRetries || !refusedCredentials(resp, t.clock.Now()) {
			return resp, err
		}
		discard(resp)
		t.log.Info("fresh installation token refused, retrying", "installation", t.id, "status", resp.StatusCode,
			"method", req.Method, "url", redact(req.URL))
		if err := t.clock.Sleep(ctx, freshTokenDelay<<attempt); err != nil {
			return nil, err
		}
	}
}

// observe notes a token change and reports whether the token is fresh.
func (t *installationTransport) observe(tok string) bool {
	h := sha256.Sum256([]byte(tok))
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if h != t.lastHash {
		t.lastHash = h
		t.mintedAt = now
	}
	return now.Sub(t.mintedAt) < freshTokenWindow
}

// refusedCredentials reports a 401, or a 403 that is neither a rate limit nor GitHub's
// "Resource not accessible by integration": that one says what the installation may do (its
// permissions, or an endpoint no installation may call, like GET /user), which no retry
// changes; nor is a 403 to a git request (a push the token may not make).
func refusedCredentials(resp *http.Response, now time.Time) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusForbidden:
		if resp.Request != nil && isGitRequest(resp.Request.URL.Path) {
			return false // a refused git push ("Permission to X denied"): no retry changes it
		}
		if _, _, limited := limitWait(resp, now); limited {
			return false
		}
		return !bodyContains(resp, notAccessibleByIntegration)
	}
	return false
}

// AppConfig configures an App.
type AppConfig struct {
	// APIURL is the REST API root: "" for https://api.github.com/, https://HOST/api/v3/ for GHE.
	APIURL string
	// AppID is the GitHub App's id; PrivateKey its PEM-encoded RSA key.
	AppID      int64
	PrivateKey []byte
	// UserAgent is sent with app-level requests; default "fleetbot".
	UserAgent string
	// Transport is the base HTTP transport; nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Clock is used for retry waits; nil means the system clock.
	Clock Clock
	// Logger receives retries and installation lookups; nil discards.
	Logger *slog.Logger
}

// App authenticates as a GitHub App: it signs JWTs, finds the installation for an owner and
// mints installation tokens, keeping one token source per installation. Share one App between
// the Clients of several owners (serve handles many installations); it is safe for concurrent
// use. App-level requests are counted in the App's own counters, not in any Client's.
type App struct {
	id      int64
	key     *rsa.PrivateKey
	baseURL string            // API root without trailing slash, as ghinstallation wants it
	chain   http.RoundTripper // retry → counting → base: under the JWT and token minting
	api     *gh.Client        // authenticated as the app (JWT)
	clock   Clock
	log     *slog.Logger

	counters *Counters

	mu       sync.Mutex
	botLogin string // "<slug>[bot]" once read
	byOwner  map[string]int64
	byID     map[int64]*ghinstallation.Transport
}

// NewApp parses the private key and prepares app authentication; it makes no request.
func NewApp(cfg AppConfig) (*App, error) {
	if cfg.AppID <= 0 {
		return nil, errors.New("GitHub App: app id must be positive")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(cfg.PrivateKey)
	if err != nil {
		// The parser's error never contains key material, but say no more than needed.
		return nil, fmt.Errorf("GitHub App %d: parsing the private key (PEM-encoded RSA expected): %w", cfg.AppID, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clock := clockOrSystem(cfg.Clock)
	counters := NewCounters()
	chain := NewRetryTransport(NewCountingTransport(baseTransport(cfg.Transport), counters),
		RetryConfig{Clock: clock, Logger: logger})
	apps := ghinstallation.NewAppsTransportFromPrivateKey(chain, cfg.AppID, key)
	api, err := newAPIClient(apps, cfg.APIURL, cfg.UserAgent)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(api.BaseURL.String(), "/")
	apps.BaseURL = base
	return &App{
		id: cfg.AppID, key: key, baseURL: base, chain: chain, api: api, clock: clock,
		log: logger, counters: counters,
		byOwner: map[string]int64{}, byID: map[int64]*ghinstallation.Transport{},
	}, nil
}

// ID returns the App's id.
func (a *App) ID() int64 { return a.id }

// BotLogin returns the login the App acts and commits as, "<slug>[bot]", read once from
// GET /app with the App's JWT. An installation token cannot tell it: GET /user answers it
// 403 "Resource not accessible by integration".
//
// GitHub API docs: https://docs.github.com/rest/apps/apps#get-the-authenticated-app
func (a *App) BotLogin(ctx context.Context) (string, error) {
	a.mu.Lock()
	login := a.botLogin
	a.mu.Unlock()
	if login != "" {
		return login, nil
	}
	app, _, err := a.api.Apps.Get(ctx, "")
	if err != nil {
		return "", Wrap(err, "reading GitHub App", strconv.FormatInt(a.id, 10))
	}
	if app.GetSlug() == "" {
		return "", fmt.Errorf("reading GitHub App %d: GitHub answered without a slug", a.id)
	}
	login = app.GetSlug() + "[bot]"
	a.mu.Lock()
	a.botLogin = login
	a.mu.Unlock()
	return login, nil
}

// Stats counts the App's own requests: installation lookups and token minting.
func (a *App) Stats() RequestStats { return a.counters.Stats() }

// InstallationID finds the App's installation on owner, an organization or else a user, and
// remembers it.
//
// GitHub API docs: https://docs.github.com/en/rest/apps/apps#get-an-organization-installation-for-the-authenticated-app
// and https://docs.github.com/en/rest/apps/apps#get-a-user-installation-for-the-authenticated-app
func (a *App) InstallationID(ctx context.Context, owner string) (int64, error) {
	if owner == "" {
		return 0, errors.New("finding the GitHub App installation: no owner given")
	}
	k := strings.ToLower(owner)
	a.mu.Lock()
	id, ok := a.byOwner[k]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	inst, _, err := a.api.Apps.FindOrganizationInstallation(ctx, owner)
	if IsNotFound(err) {
		inst, _, err = a.api.Apps.FindUserInstallation(ctx, owner)
	}
	if IsNotFound(err) {
		return 0, fmt.Errorf("finding the installation of GitHub App %d on %s (not installed on that org or user?): %w",
			a.id, owner, ErrNotFound)
	}
	if err != nil {
		return 0, Wrap(err, fmt.Sprintf("finding the installation of GitHub App %d on", a.id), owner)
	}
	id = inst.GetID()
	a.mu.Lock()
	a.byOwner[k] = id
	a.mu.Unlock()
	a.log.Debug("found GitHub App installation", "owner", owner, "installation", id)
	return id, nil
}

// Permission returns the level ("read", "write", "admin", or "" when not granted) of the
// repository or organization permission name (as in an App manifest: "checks", "contents", ...)
// that the App's installation on owner holds now. It asks GitHub every time (one App request):
// an installation holds what its owner accepted, which may lag behind the App's manifest until
// the owner accepts new permissions.
//
// GitHub API docs: https://docs.github.com/en/rest/apps/apps#get-an-organization-installation-for-the-authenticated-app
func (a *App) Permission(ctx context.Context, owner, name string) (string, error) {
	inst, _, err := a.api.Apps.FindOrganizationInstallation(ctx, owner)
	if IsNotFound(err) {
		inst, _, err = a.api.Apps.FindUserInstallation(ctx, owner)
	}
	if err != nil {
		return "", Wrap(err, fmt.Sprintf("reading the permissions of GitHub App %d's installation on", a.id), owner)
	}
	b, err := json.Marshal(inst.GetPermissions())
	if err != nil {
		return "", fmt.Errorf("reading the permissions of GitHub App %d's installation on %s: %w", a.id, owner, err)
	}
	var perms map[string]string
	if err := json.Unmarshal(b, &perms); err != nil {
		return "", fmt.Errorf("reading the permissions of GitHub App %d's installation on %s: %w", a.id, owner, err)
	}
	return perms[name], nil
}

// source returns the cached token source of an installation, creating it on first use. Each
// gets its own AppsTransport: ghinstallation writes the apps transport's fields when refreshing,
// so sharing one between installations would race.
func (a *App) source(id int64) *ghinstallation.Transport {
	a.mu.Lock()
	defer a.mu.Unlock()
	if it, ok := a.byID[id]; ok {
		return it
	}
	apps := ghinstallation.NewAppsTransportFromPrivateKey(a.chain, a.id, a.key)
	apps.BaseURL = a.baseURL
	it := ghinstallation.NewFromAppsTransport(apps, id)
	it.BaseURL = a.baseURL
	// An empty object, not the JSON null ghinstallation sends for no options: GitHub's REST
	// description takes an object (or no body) for "create an installation access token".
	it.InstallationTokenOptions = &gh.InstallationTokenOptions{}
	a.byID[id] = it
	return it
}

// transport returns the authenticating transport for installation id in front of next.
func (a *App) transport(next http.RoundTripper, id int64, clock Clock, log *slog.Logger) http.RoundTripper {
	return &installationTransport{next: next, src: a.source(id), id: id, clock: clock, log: log}
}
