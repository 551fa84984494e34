package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// defaultLocalForge is where apply writes when --forge is not given: the
// embedded local forge, so fleetbot runs with no GitHub at all.
const defaultLocalForge = "local:.fleetbot/forge"

// openForge opens the forge named by spec ("local:PATH" or "github") for
// the target repos of owner. readOnly forges refuse writes (plan); the
// returned close releases locks and connections.
func (a *app) openForge(ctx context.Context, spec, owner string, readOnly bool, log *slog.Logger) (reconcile.Forge, func() error, error) {
	switch {
	case strings.HasPrefix(spec, "local:"):
		path := strings.TrimPrefix(spec, "local:")
		if path == "" {
			return nil, nil, fmt.Errorf("--forge local:PATH needs a PATH (for example local:%s)", strings.TrimPrefix(defaultLocalForge, "local:"))
		}
		f, err := local.Open(path, local.Options{Shared: readOnly, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	case spec == "github":
		return a.openGitHub(ctx, owner, readOnly, log)
	default:
		return nil, nil, fmt.Errorf(`--forge %q: want "local:PATH" or "github"`, spec)
	}
}
