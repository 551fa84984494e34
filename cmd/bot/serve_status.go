package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/serve"
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

// config resolves the flags; it never echoes the token.
func (f *statusPageFlags) config() (serve.StatusPages, error) {
	if !f.enabled {
		if f.tokenFile != "" || f.insecure {
			return serve.StatusPages{}, errors.New("--status-token-file and --status-insecure-no-auth configure the status pages: add --status (or FLEETBOT_STATUS=true) to serve them")
		}
		return serve.StatusPages{}, nil
	}
	group, err := app.ParseStatusGroupBy(f.groupBy)
	if err != nil {
		return serve.StatusPages{}, fmt.Errorf("--status-group-by: %w", err)
	}
	c := serve.StatusPages{Enabled: true, Insecure: f.insecure, GroupBy: group}
	switch {
	case f.tokenFile != "":
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return serve.StatusPages{}, fmt.Errorf("--status-token-file: reading the status token: %w", err)
		}
		c.Token = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(c.Token) < 16 {
			return serve.StatusPages{}, fmt.Errorf("--status-token-file %s: the token is %d bytes; use at least 16 random bytes (e.g. openssl rand -hex 32)", f.tokenFile, len(c.Token))
		}
	case !f.insecure:
		return serve.StatusPages{}, errors.New("--status needs --status-token-file FILE (a bearer token), or --status-insecure-no-auth when an authenticating ingress guards /status")
	}
	return c, nil
}
