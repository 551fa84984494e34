package app

import (
	"context"
	"fmt"
	"strings"
	"sync"

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

// Forge returns the forge of the target repos of owner for mode: apply and drift forges
// share the write client (its ETag cache and write budget); the drift forge re-reads access
// settings on every run, since its events say they changed. Only the apply forge keeps its
// snapshots on disk: two forges must not share cache files.
func (s *Installations) Forge(ctx context.Context, owner string, mode ForgeMode) (reconcile.Forge, error) {
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
	opts := ghforge.ForgeOptions{Login: s.self, Logger: s.cfg.Logger, ContentTransport: s.cfg.ContentTransport}
	switch mode {
	case ForgeApply:
		opts.CacheDir = s.cfg.CacheDir
	case ForgeDrift:
		opts.AccessMaxAge = -1
	}
	f := ghforge.NewForge(c, opts)
	s.forges[key] = f
	return f, nil
}
