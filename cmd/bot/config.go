package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/app"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
)

// apiURL is the GitHub REST API URL of the flags and environment ("" for github.com).
func (a *frontend) apiURL() string {
	return app.APIURL(firstNonEmpty(a.github.apiURL, os.Getenv("GITHUB_API_URL")))
}

// base is the application configuration of the global flags and environment without a
// forge and without credentials: enough to load and render. The Git URL follows --forge as
// given (see app.ResolveGitURL), so a command's default forge does not change what it
// renders.
func (a *frontend) base(log *slog.Logger) app.Config {
	cfg := app.Config{
		GitURL: app.ResolveGitURL(a.gitURLFlag, a.forge, a.apiURL()),
		Logger: log, Stats: a.progress(), Version: version,
		Concurrency: a.concurrency, FullEvery: a.fullEvery,
	}
	cfg.GitHub.APIURL = a.apiURL()
	cfg.GitHub.Budget = a.github.budget()
	return cfg
}

// config resolves the global flags and environment into the one application configuration
// for forge (the --forge value, or a command's default); GitHub credentials are read only
// when forge is GitHub.
func (a *frontend) config(forge string, log *slog.Logger) (app.Config, error) {
	cfg := a.base(log)
	cfg.Forge = forge
	if forge != app.ForgeGitHub {
		return cfg, nil
	}
	creds, err := a.github.config(cfg.GitHub.APIURL)
	if err != nil {
		return cfg, err
	}
	cfg.GitHub = creds
	cfg.CacheDir = a.github.cache(cfg.GitHub.APIURL)
	cfg.ContentTransport, err = ghforge.ParseContentTransport(a.github.transport)
	return cfg, err
}

// load loads, validates and renders --control with the configuration of the flags (no
// forge is opened, no credential read).
func (a *frontend) load(ctx context.Context) (*app.Fleet, error) {
	a.progress().stage("loading and rendering "+a.control, -1)
	defer a.progress().end()
	return a.base(nil).Load(ctx, a.control)
}

// openRunner opens the forge named by spec for the target repos of owner and returns the
// application's Runner of plan and apply on it (read-only: a plan).
func (a *frontend) openRunner(ctx context.Context, spec, owner string, readOnly bool, log *slog.Logger) (*app.Runner, error) {
	cfg, err := a.config(spec, log)
	if err != nil {
		return nil, err
	}
	return cfg.OpenRunner(ctx, owner, readOnly)
}

// registerGitURL registers --git-url on a command that renders.
func (a *frontend) registerGitURL(fs *pflag.FlagSet) {
	fs.StringVar(&a.gitURLFlag, "git-url", "", `base URL of target repos in Flux GitRepository objects, <URL>/<owner>/<repo> (default: from --forge: http://`+app.DefaultGitServeListen+` for --forge local:PATH, where fleetbot dev git-serve serves it; otherwise GitHub's web root, https://github.com unless --github-url or GITHUB_API_URL names an Enterprise server)`)
}
