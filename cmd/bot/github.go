package main

import (
	"errors"
	"log/slog"

	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// openGitHub builds the GitHub forge from flags and environment.
func (a *app) openGitHub(readOnly bool, log *slog.Logger) (reconcile.Forge, func() error, error) {
	return nil, nil, errors.New("--forge github is not available in this build yet; use --forge local:PATH")
}
