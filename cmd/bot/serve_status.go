package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// statusPageFlags are serve's flags of the /status pages.
type statusPageFlags struct {
	enabled, insecure bool
	tokenFile         string
	groupBy           string
}

func (f *statusPageFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "status", false, "serve the fleet status pages at /status (built from the service's own last applies: no GitHub request)")
	fs.StringVar(&f.tokenFile, "status-token-file", "", "file holding the bearer token /status requires (Authorization: Bearer TOKEN)")
	fs.BoolVar(&f.insecure, "status-insecure-no-auth", false, "serve /status without a token: only behind an ingress or proxy that authenticates (see docs/serve.md)")
	fs.StringVar(&f.groupBy, "status-group-by", "kind", "groups of the /status progress bars: kind, wave or label:KEY")
}

// statusPageConfig is the resolved configuration of the /status pages.
type statusPageConfig struct {
	Enabled  bool
	Token    []byte
	Insecure bool
	GroupBy  app.StatusGrouper
}

// config resolves the flags; it never echoes the token.
func (f *statusPageFlags) config() (statusPageConfig, error) {
	if !f.enabled {
		if f.tokenFile != "" || f.insecure {
			return statusPageConfig{}, errors.New("--status-token-file and --status-insecure-no-auth configure the status pages: add --status (or FLEETBOT_STATUS=true) to serve them")
		}
		return statusPageConfig{}, nil
	}
	group, err := app.ParseStatusGroupBy(f.groupBy)
	if err != nil {
		return statusPageConfig{}, fmt.Errorf("--status-group-by: %w", err)
	}
	c := statusPageConfig{Enabled: true, Insecure: f.insecure, GroupBy: group}
	switch {
	case f.tokenFile != "":
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return statusPageConfig{}, fmt.Errorf("--status-token-file: reading the status token: %w", err)
		}
		c.Token = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(c.Token) < 16 {
			return statusPageConfig{}, fmt.Errorf("--status-token-file %s: the token is %d bytes; use at least 16 random bytes (e.g. openssl rand -hex 32)", f.tokenFile, len(c.Token))
		}
	case !f.insecure:
		return statusPageConfig{}, errors.New("--status needs --status-token-file FILE (a bearer token), or --status-insecure-no-auth when an authenticating ingress guards /status")
	}
	return c, nil
}

// withStatusPages mounts the /status pages in front of the service's routes when enabled. The
// pages read the service's retained reports only: loading them costs no GitHub request.
func withStatusPages(cfg serveConfig, next http.Handler, svc *atomic.Pointer[webhook.Service]) (http.Handler, error) {
	if !cfg.Status.Enabled {
		return next, nil
	}
	web := strings.TrimSuffix(app.ResolveGitURL(cfg.App.GitURL, app.ForgeGitHub, cfg.App.GitHub.APIURL), "/")
	pages, err := app.StatusPages(app.StatusPagesConfig{
		Token: cfg.Status.Token, InsecureNoAuth: cfg.Status.Insecure, GroupBy: cfg.Status.GroupBy,
		RepoURL: func(full string) string { return web + "/" + full },
		Reports: func() app.Reports {
			if s := svc.Load(); s != nil {
				return s.Reports()
			}
			return app.Reports{}
		},
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/status", pages)
	mux.Handle("/status/", pages)
	mux.Handle("/", next)
	return mux, nil
}
