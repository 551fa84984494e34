// Package app is fleetbot's application layer and its one composition root: from one resolved
// Config it builds the forge (local, GitHub or GitHub Enterprise Server), the renderer (with
// the Git URL target repos are cloned from), the write budget, the snapshot cache and the clock,
// and it runs the operations every front end shares (load, plan, apply). The CLI, the Action
// and the webhook service only turn their flags, inputs or events into a Config and call it,
// so the same configuration renders the same bytes whichever front end runs.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// Forge kinds of Config.Forge.
const (
	// ForgeGitHub is GitHub or GitHub Enterprise Server (Config.GitHub.APIURL).
	ForgeGitHub = "github"
	// LocalPrefix starts "local:PATH", the local forge of bare git repos under PATH.
	LocalPrefix = "local:"
	// DefaultLocalForge is where apply writes when no forge is given: the embedded local
	// forge, so fleetbot runs with no GitHub at all.
	DefaultLocalForge = "local:.fleetbot/forge"
	// DefaultGitServeListen is where fleetbot dev git-serve serves a local forge, and so the
	// Git URL of target repos rendered for one.
	DefaultGitServeListen = "127.0.0.1:8480"
)

// Config is fleetbot's resolved configuration: every front end builds one from its flags,
// environment or Action inputs, and everything it runs is built from it.
type Config struct {
	// Forge is "local:PATH" or "github"; "" is no forge (offline plan, render, validate).
	Forge string
	// GitHub carries the API URL (GitHub Enterprise Server: https://HOST/api/v3/), the
	// credentials (App id and key, or a token) and the write budget with its clock. Owner,
	// ReadOnly and Logger are set per client.
	GitHub ghforge.Config
	// GitURL is the base URL of target repos in Flux GitRepository objects; "" resolves it
	// from Forge and GitHub.APIURL (see ResolveGitURL).
	GitURL string
	// CacheDir is the GitHub snapshot cache directory; "" keeps snapshots in memory.
	CacheDir string
	// ContentTransport is how the GitHub forge writes commits: the Git Data API ("" or
	// "api", the default) or one git push per commit ("git"), the API as fallback.
	ContentTransport ghforge.ContentTransport
	// Logger receives logs; nil discards.
	Logger *slog.Logger
	// Stats, when set, receives one line of GitHub request counts when a forge closes.
	Stats io.Writer

	// What a Runner runs with (OpenRunner, ServiceRunner):
	//
	// Concurrency bounds how many target repos a plan or an apply works on at once (default
	// DefaultConcurrency): the one place it is set, for every front end.
	Concurrency int
	// FullEvery turns an incremental apply full when the last full run is older (default
	// DefaultFullEvery; negative: only when asked or after a failure).
	FullEvery time.Duration
	// Version is fleetbot's version: a baseline another version recorded is not used.
	Version string
	// Shard is this replica's share of the target repos (serve; docs/scale-out.md); the zero
	// Shard owns every repo.
	Shard Shard
	// Now is the clock the rollout gate weighs soaks, timeouts and windows by (nil: time.Now).
	Now func() time.Time
	// OnApplied, when set, is told each target repo's result as an apply finishes it, never
	// concurrently (serve's reconcile metric).
	OnApplied func(RepoResult)
}

// ResolveGitURL is the base URL of target repos rendered into Flux GitRepository objects:
// explicit when given, else where forge serves them: an explicit local forge where fleetbot
// dev git-serve serves it, GitHub (and GitHub Enterprise Server, from apiURL) at its web
// root. Without a forge it is GitHub's, so what render prints is what an apply on GitHub
// writes. This is the one place that decides it, for every front end.
func ResolveGitURL(explicit, forge, apiURL string) string {
	switch {
	case explicit != "":
		return explicit
	case strings.HasPrefix(forge, LocalPrefix):
		return "http://" + DefaultGitServeListen
	}
	if root := WebRoot(apiURL); root != "" {
		return root
	}
	return fanout.DefaultGitURL
}

// WebRoot derives the web root from a GitHub Enterprise API URL
// (https://HOST/api/v3/ -> https://HOST); "" means github.com.
func WebRoot(apiURL string) string {
	if apiURL == "" {
		return ""
	}
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "api.github.com" {
		return ""
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	return strings.TrimSuffix(u.String(), "/")
}

// APIURL normalises a REST API URL to end in "/", as go-github wants; "" stays "".
func APIURL(u string) string {
	if u != "" && !strings.HasSuffix(u, "/") {
		return u + "/"
	}
	return u
}

// gitURL is the resolved Git URL of c.
func (c Config) gitURL() string { return ResolveGitURL(c.GitURL, c.Forge, c.GitHub.APIURL) }

// Renderer is the renderer of c: its Git URL, its logger. A long-lived front end (serve)
// keeps one; it caches kustomize builds.
func (c Config) Renderer() *fanout.Renderer {
	return fanout.NewRenderer(fanout.Options{GitURL: c.gitURL(), Logger: c.Logger})
}

// ClientConfig is the GitHub client configuration of the installation (or token) on owner;
// readOnly clients refuse every write in their transport.
func (c Config) ClientConfig(owner string, readOnly bool) ghforge.Config {
	g := c.GitHub
	g.APIURL = APIURL(g.APIURL)
	g.Owner, g.ReadOnly, g.Logger = owner, readOnly, c.Logger
	return g
}

// GitHubClient connects to the installation (or token) of c on owner.
func (c Config) GitHubClient(ctx context.Context, owner string, readOnly bool) (*ghforge.Client, error) {
	return ghforge.New(ctx, c.ClientConfig(owner, readOnly))
}

// OpenForge opens c's forge for the target repos of owner. A read-only forge refuses writes
// (plan); the returned close releases locks and, for GitHub, writes the run's request counts
// to c.Stats.
func (c Config) OpenForge(ctx context.Context, owner string, readOnly bool) (reconcile.Forge, func() error, error) {
	switch {
	case strings.HasPrefix(c.Forge, LocalPrefix):
		path := strings.TrimPrefix(c.Forge, LocalPrefix)
		if path == "" {
			return nil, nil, fmt.Errorf("--forge local:PATH needs a PATH (for example local:%s)", strings.TrimPrefix(DefaultLocalForge, LocalPrefix))
		}
		f, err := local.Open(path, local.Options{Shared: readOnly, Logger: c.Logger})
		if err != nil {
			return nil, nil, err
		}
		return f, f.Close, nil
	case c.Forge == ForgeGitHub:
		return c.openGitHub(ctx, owner, readOnly)
	default:
		return nil, nil, fmt.Errorf(`--forge %q: want "local:PATH" or "github"`, c.Forge)
	}
}

// openGitHub builds the GitHub forge for the installation on owner.
func (c Config) openGitHub(ctx context.Context, owner string, readOnly bool) (reconcile.Forge, func() error, error) {
	cl, err := c.GitHubClient(ctx, owner, readOnly)
	if err != nil {
		return nil, nil, err
	}
	if c.CacheDir != "" {
		if err := ghforge.PrepareCacheDir(c.CacheDir); err != nil {
			return nil, nil, fmt.Errorf("--github-cache: %w", err)
		}
	}
	f := ghforge.NewForge(cl, ghforge.ForgeOptions{CacheDir: c.CacheDir, Logger: c.Logger, ContentTransport: c.ContentTransport})
	closeFn := func() error {
		if c.Stats != nil {
			writeStats(c.Stats, cl.Stats())
		}
		return nil
	}
	return f, closeFn, nil
}

// writeStats writes one line of a run's GitHub request counts.
func writeStats(w io.Writer, s ghforge.Stats) {
	fmt.Fprintf(w, "github: %d reads (%d answered 304), %d writes (%d content-creating); waited %s for limits\n",
		s.Requests.Reads, s.Requests.NotModified, s.Requests.Writes, s.Requests.ContentWrites, s.Budget.Waited.Round(time.Millisecond))
}

// ExitCode ends a front end with a chosen process status without printing an error, as
// DESIGN's exit codes say: 0 nothing to do, 1 error, 2 changes pending, 3 blocked on a human.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
