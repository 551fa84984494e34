package app

import (
	"context"
	"fmt"
	"strings"
	"sync"

	gh "github.com/google/go-github/v62/github"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// ForgeMode says what an operation needs a forge for.
type ForgeMode int

// Forge modes.
const (
	// ForgeApply writes; it may trust what it observed recently (apply and resync).
	ForgeApply ForgeMode = iota
	// ForgeDrift writes and reads access settings afresh: the event says they changed.
	ForgeDrift
	// ForgePlan refuses every write: a plan can never write to a target repo.
	ForgePlan
)

// ConnectApp checks the GitHub App credentials of c (GET /app, which also names the App's
// bot account, "<slug>[bot]") and finds its installation on owner.
func (c Config) ConnectApp(ctx context.Context, owner string) (*ghforge.App, string, error) {
	gh := c.GitHub
	ghApp, err := ghforge.NewApp(ghforge.AppConfig{APIURL: APIURL(gh.APIURL), AppID: gh.AppID, PrivateKey: gh.PrivateKey, Logger: c.Logger})
	if err != nil {
		return nil, "", err
	}
	self, err := ghApp.BotLogin(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("%w (wrong app id or key?)", err)
	}
	if _, err := ghApp.InstallationID(ctx, owner); err != nil {
		return nil, "", err
	}
	return ghApp, self, nil
}

// Installations opens the GitHub clients and forges of a long-running service per owner and
// mode on demand, sharing one App (its JWT signer and installation tokens). It is safe for
// concurrent use.
type Installations struct {
	cfg      Config
	app      *ghforge.App
	self     string
	onClient func(key string, c *ghforge.Client)

	mu      sync.Mutex
	clients map[string]*ghforge.Client
	forges  map[string]*ghforge.Forge
}

// Installations returns the installations of ghApp, which acts as self; onClient, when set,
// is called once per new client (serve exports its request counters as metrics).
func (c Config) Installations(ghApp *ghforge.App, self string, onClient func(key string, c *ghforge.Client)) *Installations {
	return &Installations{cfg: c, app: ghApp, self: self, onClient: onClient,
		clients: map[string]*ghforge.Client{}, forges: map[string]*ghforge.Forge{}}
}

// Client returns the client of owner's installation.
func (s *Installations) Client(ctx context.Context, owner string, readOnly bool) (*ghforge.Client, error) {
	key := strings.ToLower(owner) + "/write"
	if readOnly {
		key = strings.ToLower(owner) + "/read-only"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[key]; ok {
		return c, nil
	}
	cfg := s.cfg.ClientConfig(owner, readOnly)
	cfg.AppID, cfg.PrivateKey, cfg.App = 0, nil, s.app
	c, err := ghforge.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.clients[key] = c
	if s.onClient != nil {
		s.onClient(key, c)
	}
	return c, nil
}

// API returns the REST client of owner's installation, read-only unless write: what the
// webhook service's GitHub adapters (internal/githubapi) read and write through.
func (s *Installations) API(ctx context.Context, owner string, write bool) (*gh.Client, error) {
	c, err := s.Client(ctx, owner, !write)
	if err != nil {
		return nil, err
	}
	return c.API(), nil
}

// Forge returns the forge of the target repos of owner for mode. The apply forge (its
// snapshots on disk with a cache directory) is the one that knows the repos; the drift and
// plan forges are views of it (ghforge.Forge.View) that share that knowledge: the drift forge
// writes through the same client (its ETag cache and write budget) and re-reads access
// settings on every run, since its events say they changed; the plan forge reads through a
// read-only client. A check's plan after a start therefore costs what an apply costs (one
// GraphQL read per 100 repos), not a full read of every repo.
func (s *Installations) Forge(ctx context.Context, owner string, mode ForgeMode) (reconcile.Forge, error) {
	apply, err := s.forge(ctx, owner, ForgeApply)
	if err != nil || mode == ForgeApply {
		return apply, err
	}
	return s.forge(ctx, owner, mode)
}

// forge returns (opening it once) the forge of owner for mode; the apply forge must be open
// before the others.
func (s *Installations) forge(ctx context.Context, owner string, mode ForgeMode) (*ghforge.Forge, error) {
	c, err := s.Client(ctx, owner, mode == ForgePlan)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s/%d", strings.ToLower(owner), mode)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.forges[key]; ok {
		return f, nil
	}
	var f *ghforge.Forge
	switch mode {
	case ForgeApply:
		f = ghforge.NewForge(c, ghforge.ForgeOptions{Login: s.self, Logger: s.cfg.Logger, ContentTransport: s.cfg.ContentTransport, CacheDir: s.cfg.CacheDir})
	case ForgeDrift:
		f = s.forges[fmt.Sprintf("%s/%d", strings.ToLower(owner), ForgeApply)].View(c, ghforge.ViewOptions{AccessMaxAge: -1})
	default:
		f = s.forges[fmt.Sprintf("%s/%d", strings.ToLower(owner), ForgeApply)].View(c, ghforge.ViewOptions{})
	}
	s.forges[key] = f
	return f, nil
}
