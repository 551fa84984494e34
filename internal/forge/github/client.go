package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// DefaultUserAgent identifies fleetbot to GitHub, which asks every client to send one.
const DefaultUserAgent = "fleetbot"

// Config configures New. Exactly one of Token and (AppID, PrivateKey) or App must be set.
type Config struct {
	// APIURL is the REST API root: "" for https://api.github.com/; for GitHub Enterprise Server,
	// https://HOST/api/v3/. It must not carry credentials.
	APIURL string
	// Token is a personal access or Actions token, sent as "Authorization: token X".
	Token string
	// AppID and PrivateKey (PEM) authenticate as a GitHub App installed on Owner.
	AppID      int64
	PrivateKey []byte
	// App, when set, is used instead of AppID/PrivateKey, so several Clients (one per owner)
	// share its JWT signer and installation tokens.
	App *App
	// Owner is the org or user whose installation to use (App auth only).
	Owner string
	// ReadOnly makes every non-GET request fail with ErrReadOnly before reaching the network.
	ReadOnly bool
	// Budget sets the write budget and the clock of every wait.
	Budget BudgetConfig
	// ReadConcurrency bounds concurrent reads; default DefaultReadConcurrency.
	ReadConcurrency int
	// MaxAttempts bounds attempts on 502/503/504; default DefaultMaxAttempts.
	MaxAttempts int
	// CacheEntries and CacheBytes bound the ETag cache; defaults DefaultCacheEntries/Bytes.
	CacheEntries int
	CacheBytes   int64
	// UserAgent defaults to DefaultUserAgent.
	UserAgent string
	// Logger receives waits and retries (never credentials); nil discards.
	Logger *slog.Logger
	// Transport is the base HTTP transport; nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
}

// Client is a go-github client for one installation (or token) whose transport enforces
// fleetbot's limits, plus the statistics of that transport.
type Client struct {
	api            *gh.Client
	budget         *Budget
	counters       *Counters
	cache          *CacheTransport
	installationID int64
	readOnly       bool
	app            *App // nil with token auth
}

// Stats is a snapshot of a Client's request counters, ETag cache and write budget.
type Stats struct {
	Requests RequestStats
	Cache    CacheStats
	Budget   BudgetStats
}

// New builds a Client. With App auth it looks up the installation for cfg.Owner (one request,
// made as the app, which works in read-only mode too); otherwise it makes no request.
//
// The transport chain, from the caller inwards: GraphQL classification, read-only guard (if
// ReadOnly), ETag cache, retry, write budget, read concurrency, authentication, request
// counters, network.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := checkAPIURL(cfg.APIURL); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	budget := NewBudget(cfg.Budget)
	bc := budget.Config()
	counters := NewCounters()
	base := baseTransport(cfg.Transport)

	var (
		rt             http.RoundTripper = gitAuthTransport{next: NewCountingTransport(base, counters)}
		identity       string
		installationID int64
		appAuthed      *App
	)
	appAuth := cfg.App != nil || cfg.AppID != 0 || len(cfg.PrivateKey) > 0
	switch {
	case appAuth && cfg.Token != "":
		return nil, errors.New("GitHub client: both a token and GitHub App credentials given; choose one")
	case cfg.Token != "":
		rt = NewTokenTransport(rt, cfg.Token)
		sum := sha256.Sum256([]byte(cfg.Token))
		identity = "token:" + hex.EncodeToString(sum[:8])
	case appAuth:
		app := cfg.App
		if app == nil {
			var err error
			app, err = NewApp(AppConfig{
				APIURL: cfg.APIURL, AppID: cfg.AppID, PrivateKey: cfg.PrivateKey, UserAgent: cfg.UserAgent,
				Transport: base, Clock: bc.Clock, Logger: logger,
			})
			if err != nil {
				return nil, err
			}
		}
		id, err := app.InstallationID(ctx, cfg.Owner)
		if err != nil {
			return nil, err
		}
		installationID, appAuthed = id, app
		rt = app.transport(rt, id, bc.Clock, logger.With("installation", id))
		identity = fmt.Sprintf("app:%d/installation:%d", app.ID(), id)
	default:
		return nil, errors.New("GitHub client: no credentials; give a token, or a GitHub App id and private key")
	}

	rt = NewReadLimitTransport(rt, cfg.ReadConcurrency)
	rt = NewBudgetTransport(rt, budget)
	rt = NewRetryTransport(rt, RetryConfig{
		MaxAttempts: cfg.MaxAttempts, MaxWait: bc.MaxWait, Clock: bc.Clock, Budget: budget, Logger: logger,
	})
	cache := NewCacheTransport(rt, identity, cfg.CacheEntries, cfg.CacheBytes)
	rt = cache
	if cfg.ReadOnly {
		rt = NewReadOnlyTransport(rt)
	}
	rt = NewClassifyTransport(rt)
	api, err := newAPIClient(rt, cfg.APIURL, cfg.UserAgent)
	if err != nil {
		return nil, err
	}
	return &Client{
		api: api, budget: budget, counters: counters, cache: cache,
		installationID: installationID, readOnly: cfg.ReadOnly, app: appAuthed,
	}, nil
}

// API returns the go-github client. Call its services directly
// (c.API().Git.CreateTree(ctx, ...)); every request goes through the limits.
func (c *Client) API() *gh.Client { return c.api }

// Budget returns the installation's write budget, e.g. to check Afford before starting a repo.
func (c *Client) Budget() *Budget { return c.budget }

// InstallationID returns the GitHub App installation in use (0 with token auth).
func (c *Client) InstallationID() int64 { return c.installationID }

// BotLogin returns the login of the GitHub App the client acts as ("<slug>[bot]", from
// GET /app with the App's JWT, read once per App); "" with token auth, whose account only
// GET /user can tell.
func (c *Client) BotLogin(ctx context.Context) (string, error) {
	if c.app == nil {
		return "", nil
	}
	return c.app.BotLogin(ctx)
}

// ReadOnly reports whether the client refuses to write.
func (c *Client) ReadOnly() bool { return c.readOnly }

// Stats returns a snapshot of requests, cache and budget.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.counters.Stats(), Cache: c.cache.Stats(), Budget: c.budget.Stats()}
}

// checkAPIURL rejects URLs that would put credentials into go-github's error messages.
func checkAPIURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("GitHub API URL %q: want an absolute URL like https://github.example.com/api/v3/", RedactURL(raw))
	}
	if u.User != nil {
		return fmt.Errorf("GitHub API URL %s: credentials in the URL are not supported; use a token or a GitHub App", redact(u))
	}
	return nil
}

// newAPIClient returns a go-github client on rt for apiURL ("" = github.com).
func newAPIClient(rt http.RoundTripper, apiURL, userAgent string) (*gh.Client, error) {
	c := gh.NewClient(&http.Client{Transport: rt})
	if apiURL != "" && strings.TrimSuffix(apiURL, "/") != "https://api.github.com" {
		u, err := url.Parse(apiURL)
		if err != nil {
			return nil, fmt.Errorf("GitHub API URL %s: %w", RedactURL(apiURL), errors.Unwrap(err))
		}
		upload := *u
		upload.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3") + "/api/uploads/"
		c, err = c.WithEnterpriseURLs(u.String(), upload.String())
		if err != nil {
			return nil, fmt.Errorf("GitHub API URL %s: %w", redact(u), err)
		}
	}
	if userAgent == "" {
		userAgent = DefaultUserAgent
	}
	c.UserAgent = userAgent
	return c, nil
}

// baseTransport returns rt, or a private clone of http.DefaultTransport so that tuning it never
// affects other users of the default.
func baseTransport(rt http.RoundTripper) http.RoundTripper {
	if rt != nil {
		return rt
	}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t := dt.Clone()
		t.MaxIdleConnsPerHost = 2 * DefaultReadConcurrency
		return t
	}
	return http.DefaultTransport
}
