package githubtest

import (
	"crypto/rsa"
	"log/slog"
	"net/http"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// Defaults of a new Server.
const (
	// DefaultUser is the login of the user the default token belongs to; it is an owner of every org.
	DefaultUser = "octocat"
	// DefaultToken is a personal access token of DefaultUser accepted by every new Server.
	DefaultToken = "ghp_fakegithubdefaulttoken"
	// DefaultAppID is the GitHub App id of a new Server.
	DefaultAppID = 1
	// DefaultAppSlug is the GitHub App slug of a new Server; its bot user is "<slug>[bot]".
	DefaultAppSlug = "fleetbot"
	// DefaultPrimaryLimit is GitHub's REST budget per hour for a user token.
	DefaultPrimaryLimit = 5000
	// DefaultPerPage and MaxPerPage are GitHub's pagination sizes.
	DefaultPerPage = 30
	MaxPerPage     = 100
)

// Option configures a Server.
type Option func(*config)

type config struct {
	// noRulesets: a GitHub Enterprise Server from before rulesets (WithoutRulesets).
	noRulesets     bool
	primaryLimit   int
	primaryStatus  int
	ccPerMinute    int
	ccPerHour      int
	ccRetryAfter   bool
	concurrency    int
	timeScale      float64
	start          time.Time
	appID          int64
	appSlug        string
	appKey         *rsa.PrivateKey
	appPub         *rsa.PublicKey
	users          map[string]string // token -> login
	hookURL        string
	hookURLFile    string
	hookSecret     string
	logger         *slog.Logger
	tokenLifetime  time.Duration
	anonymousReads bool
	tls            bool
	ghes           bool
	spec           *restspec.Description
	specReport     func(restspec.Violation)
	noSpec         bool
	appPerms       map[string]string // nil: installation tokens may do anything
	appEvents      []string          // the App's webhook events (nil: every event the fake sends)
	noManifest     bool              // do not read the repository's app.yml
	noUpdateRefs   bool              // the GraphQL schema has no updateRefs (WithoutUpdateRefs)

	graphQLLimit     int
	graphQLLimitSet  bool
	secondaryStatus  int
	pointsPerMinute  int
	pointsRetryAfter bool
	pacing           bool
	pacingInterval   time.Duration
	manualClock      bool
}

func defaultConfig() config {
	return config{
		primaryLimit:  DefaultPrimaryLimit,
		primaryStatus: http.StatusForbidden,
		timeScale:     1,
		appID:         DefaultAppID,
		appSlug:       DefaultAppSlug,
		users:         map[string]string{DefaultToken: DefaultUser},
		logger:        slog.New(slog.DiscardHandler),
		tokenLifetime: time.Hour,
	}
}

// WithPrimaryLimit sets the REST budget per (fake) hour for each token; 0 disables it.
func WithPrimaryLimit(perHour int) Option { return func(c *config) { c.primaryLimit = perHour } }

// WithPrimaryLimitStatus chooses the status of an exhausted primary limit: 403 (default) or 429.
func WithPrimaryLimitStatus(status int) Option { return func(c *config) { c.primaryStatus = status } }

// WithContentCreationLimit turns on the secondary content-creation limit (per token, per fake
// minute and hour; 0 means no limit for that window). withRetryAfter adds a Retry-After header.
func WithContentCreationLimit(perMinute, perHour int, withRetryAfter bool) Option {
	return func(c *config) {
		c.ccPerMinute, c.ccPerHour, c.ccRetryAfter = perMinute, perHour, withRetryAfter
	}
}

// WithConcurrencyLimit turns on the secondary limit on requests in flight at once.
func WithConcurrencyLimit(n int) Option { return func(c *config) { c.concurrency = n } }

// WithTimeScale makes fake time run f times faster than the wall clock (3600: an hour per second).
func WithTimeScale(f float64) Option { return func(c *config) { c.timeScale = f } }

// WithStartTime sets the fake clock's start instant (default: now).
func WithStartTime(t time.Time) Option { return func(c *config) { c.start = t } }

// WithApp sets the GitHub App's id and slug.
func WithApp(id int64, slug string) Option {
	return func(c *config) { c.appID, c.appSlug = id, slug }
}

// WithAppKey sets the App's private key (the server verifies JWTs with its public half).
func WithAppKey(key *rsa.PrivateKey) Option {
	return func(c *config) { c.appKey, c.appPub = key, &key.PublicKey }
}

// WithAppPublicKey sets only the App's public key, as GitHub knows it.
func WithAppPublicKey(pub *rsa.PublicKey) Option { return func(c *config) { c.appPub = pub } }

// WithUser adds a user with a personal access token (created on first use of the server).
func WithUser(login, token string) Option { return func(c *config) { c.users[token] = login } }

// WithWebhook makes the server deliver push, pull_request and installation events to url, signed
// with secret, whenever its state changes (asynchronously; Close waits for deliveries).
func WithWebhook(url, secret string) Option {
	return func(c *config) { c.hookURL, c.hookSecret = url, secret }
}

// WithWebhookURLFile is WithWebhook with the URL read from a file at each delivery: a demo can
// start the fake before the service it delivers to has chosen its port (events are dropped,
// with a log line, while the file is missing or empty).
func WithWebhookURLFile(path, secret string) Option {
	return func(c *config) { c.hookURLFile, c.hookSecret = path, secret }
}

// WithLogger sets the logger for server-side events (deliveries, git backend errors).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithTokenLifetime sets how long installation tokens live in fake time (default one hour).
func WithTokenLifetime(d time.Duration) Option { return func(c *config) { c.tokenLifetime = d } }

// WithAnonymousReads lets unauthenticated GET requests (REST and git fetch) through, as GitHub
// does for public repositories; by default they get 401 "Requires authentication".
func WithAnonymousReads() Option { return func(c *config) { c.anonymousReads = true } }

// WithTLS makes NewServer serve HTTPS (httptest's certificate for 127.0.0.1, see CertPEM), for
// a client that refuses plain HTTP or is to be given a CA, as a GitHub Enterprise client is.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// WithoutUpdateRefs makes the fake a GitHub whose GraphQL schema has no updateRefs mutation (a
// GitHub Enterprise Server without it, or one where its schema preview is not enabled): a
// document naming it is answered "Field 'updateRefs' doesn't exist on type 'Mutation'".
func WithoutUpdateRefs() Option { return func(c *config) { c.noUpdateRefs = true } }
