package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// exitBlocked is status's exit code when a repo is blocked on a human (DESIGN: 3).
const exitBlocked = 3

// defaultWatchInterval is how often status --watch looks again: each look is one read-only
// plan (on GitHub one GraphQL query per 100 repos).
const defaultWatchInterval = 30 * time.Second

// statusFlags are the flags of fleetbot status.
type statusFlags struct {
	format, selector, groupBy string
	blocked                   bool
	repos                     []string
	watch                     bool
	interval                  time.Duration
	html                      string
}

func (a *frontend) statusCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet at a glance: per target repo its revision, open PR and what it waits on, Flux health, drift",
		Long: `status plans every target repo against the forge (read-only, the cost of a
no-op plan: on GitHub one GraphQL query per 100 repos) and shows one row per
repo: kind, labels, state (unhealthy, failed, blocked, deferred, pending,
pr-open, in-sync, skipped), the control-repo revision rendered, the open pull
request with its age and what it waits on (review, checks, merge, human edit,
budget), the control-repo revision last merged, Flux health (the combined
commit status of the default branch head; a failure names the failing
Kustomization or HelmRelease and Flux's message), and drift (access,
CODEOWNERS), then a summary line.

--watch looks again every --interval until interrupted: on a terminal the view
is redrawn in place; otherwise each look is appended, under a line with its
time. --html DIR writes the view as the pages serve's /status shows (index.html
and one page per repo, no script), for any forge, the local one included; with
--watch they are rewritten at each look and reload themselves.

Exit status: 0, 3 when a shown repo is blocked on a human (someone pushed to
fleetbot's branch), 1 on error (including a repo that could not be read); with
--watch, 0 when interrupted. Without --forge it reads local:.fleetbot/forge.`,
		Example: `  fleetbot status --control testdata/control
  fleetbot status --control . --forge github --selector 'env=prod,region in (eu)' --group-by label:region
  # only the repos blocked on a human, as JSON
  fleetbot status --control . --forge github --blocked -o json
  # the status pages as files, for the local forge (open status/index.html)
  fleetbot status --control testdata/control --html status
  # keep watching: redrawn every minute on a terminal
  fleetbot status --control . --forge github --watch --interval 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.status(cmd, &f)
		},
	}
	fs := cmd.Flags()
	a.registerGitURL(fs)
	formatVar(fs, &f.format, []string{formatText, formatJSON})
	fs.StringVar(&f.selector, "selector", "", "only repos whose cluster (or workspace) labels match this Kubernetes label selector, e.g. env=prod,region in (eu,us)")
	fs.BoolVar(&f.blocked, "blocked", false, "only repos blocked on a human")
	fs.StringSliceVar(&f.repos, "repo", nil, "only these target repos (name or owner/name; repeat or comma-separate); only they are read")
	fs.StringVar(&f.groupBy, "group-by", "kind", "group of the summary: kind, wave or label:KEY")
	fs.BoolVar(&f.watch, "watch", false, "look again every --interval until interrupted: redrawn in place on a terminal, appended otherwise")
	positiveDurationVar(fs, &f.interval, "interval", defaultWatchInterval, "how often --watch looks again (each look is one read-only plan)")
	fs.StringVar(&f.html, "html", "", "write the view as status pages into this directory (index.html, repo/NAME.html): empty, missing, or an earlier --html output")
	return cmd
}

func (a *frontend) status(cmd *cobra.Command, f *statusFlags) error {
	sel, err := app.ParseStatusSelector(f.selector)
	if err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	group, err := app.ParseStatusGroupBy(f.groupBy)
	if err != nil {
		return fmt.Errorf("--group-by: %w", err)
	}
	if f.html != "" {
		if err := checkStatusDir(f.html); err != nil {
			return err
		}
	}
	look := func(ctx context.Context) (*app.StatusView, error) { return a.statusView(ctx, f, sel, group) }
	if f.watch {
		return a.watchStatus(cmd.Context(), f, look)
	}
	view, err := look(cmd.Context())
	if err != nil {
		return err
	}
	if err := a.writeStatus(a.stdout, f, view); err != nil {
		return err
	}
	if failed := view.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, r := range failed {
			names[i] = r.Repo
		}
		return fmt.Errorf("%d target repo(s) could not be read: %s", len(failed), strings.Join(names, ", "))
	}
	if view.Blocked() {
		return exitCode(exitBlocked)
	}
	return nil
}

// statusView loads the control repo, plans every target repo read-only and builds the view.
func (a *frontend) statusView(ctx context.Context, f *statusFlags, sel app.StatusSelector, group app.StatusGrouper) (*app.StatusView, error) {
	fl, err := a.load(ctx)
	if err != nil {
		return nil, app.DescribeLoadError(a.control, err)
	}
	only, err := onlyRepos(fl, f.repos)
	if err != nil {
		return nil, err
	}
	log, err := a.logger()
	if err != nil {
		return nil, err
	}
	spec := firstNonEmpty(a.forge, app.DefaultLocalForge)
	owner := fl.Repo.Platform.Spec.Owner
	runner, err := a.openRunner(ctx, spec, owner, true, log)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	opts := app.StatusOptions{Only: only, Selector: sel, Blocked: f.blocked, GroupBy: group, Now: a.clock(), Step: a.progress().step}
	if spec == "github" {
		root := app.ResolveGitURL("", app.ForgeGitHub, a.apiURL())
		opts.RepoURL = func(full string) string { return root + "/" + full }
	}
	view, err := runner.Status(ctx, fl, opts)
	a.progress().end()
	return view, err
}

// writeStatus prints a view (text or JSON) and writes its pages when --html asks.
func (a *frontend) writeStatus(w io.Writer, f *statusFlags, view *app.StatusView) error {
	if f.html != "" {
		refresh := time.Duration(0)
		if f.watch {
			refresh = f.interval
		}
		n, err := writeStatusPages(f.html, view, refresh)
		if err != nil {
			return err
		}
		if f.format != formatJSON {
			_, err = fmt.Fprintf(w, "status pages of %d repos written to %s (and %d repo pages)\n%s\n",
				len(view.Repos), filepath.Join(f.html, "index.html"), n-1, view.Summary.Line)
			return err
		}
	}
	if f.format == formatJSON {
		return view.WriteJSON(w)
	}
	return view.WriteText(w)
}

// clearScreen moves the cursor home and clears the terminal: the next look is drawn in place.
const clearScreen = "\x1b[H\x1b[2J"

// watchStatus looks at the fleet every --interval until ctx is done (or, in tests, the
// ticker's channel closes): on a terminal each look replaces the last one, otherwise it is
// appended under a line with its time. A look that fails is shown and the watch goes on.
func (a *frontend) watchStatus(ctx context.Context, f *statusFlags, look func(context.Context) (*app.StatusView, error)) error {
	ticks, stop := a.ticker(f.interval)
	defer stop()
	onTerminal := a.terminal(a.stdout)
	for {
		var buf bytes.Buffer
		if onTerminal {
			buf.WriteString(clearScreen)
		}
		fmt.Fprintf(&buf, "fleetbot status --watch: %s, every %s (Ctrl-C stops)\n", a.clock().UTC().Format(time.RFC3339), f.interval)
		view, err := look(ctx)
		switch {
		case ctx.Err() != nil:
			return nil // interrupted while looking: the watch is over
		case err != nil:
			fmt.Fprintf(&buf, "error: %v\n", err)
		default:
			if err := a.writeStatus(&buf, f, view); err != nil {
				fmt.Fprintf(&buf, "error: %v\n", err)
			}
		}
		if !onTerminal {
			buf.WriteString("\n")
		}
		if _, err := a.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-ticks:
			if !ok {
				return nil
			}
		}
	}
}

// clock is the time of a look (tests inject it).
func (a *frontend) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

// ticker ticks every d for --watch (tests inject a channel they drive); stop releases it.
func (a *frontend) ticker(d time.Duration) (<-chan time.Time, func()) {
	if a.newTicker != nil {
		return a.newTicker(d)
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// statusMarker marks a directory fleetbot status --html wrote, so a later one may write it
// again and nothing else is overwritten.
const statusMarker = ".fleetbot-status"

// checkStatusDir refuses an --html directory fleetbot did not write: it must be missing,
// empty, or hold statusMarker.
func checkStatusDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--html %s: %w", dir, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, statusMarker)); err != nil {
		return fmt.Errorf("--html %s holds files fleetbot status did not write (no %s): give an empty or new directory", dir, statusMarker)
	}
	return nil
}

// writeStatusPages writes the view's pages into dir, each file atomically (a browser reloading
// it never reads half a page), and removes the pages of repos no longer shown. It returns how
// many pages it wrote.
func writeStatusPages(dir string, view *app.StatusView, refresh time.Duration) (int, error) {
	files, err := app.StatusFiles(view, refresh)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "repo"), 0o755); err != nil {
		return 0, fmt.Errorf("--html %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, statusMarker), []byte("written by fleetbot status --html\n"), 0o644); err != nil {
		return 0, fmt.Errorf("--html %s: %w", dir, err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := writePageAtomic(filepath.Join(dir, filepath.FromSlash(name)), files[name]); err != nil {
			return 0, fmt.Errorf("--html %s: %w", dir, err)
		}
	}
	old, err := os.ReadDir(filepath.Join(dir, "repo"))
	if err != nil {
		return 0, fmt.Errorf("--html %s: %w", dir, err)
	}
	for _, e := range old {
		if _, keep := files["repo/"+e.Name()]; !keep && strings.HasSuffix(e.Name(), ".html") {
			if err := os.Remove(filepath.Join(dir, "repo", e.Name())); err != nil {
				return 0, fmt.Errorf("--html %s: %w", dir, err)
			}
		}
	}
	return len(files), nil
}

// writePageAtomic writes data to a temporary file beside name and renames it into place.
func writePageAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// onlyRepos checks --repo names against the rendered targets and returns them as the plan's
// Only list (nil: every repo).
func onlyRepos(fl *app.Fleet, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	known := map[string]string{}
	for _, t := range fl.Targets {
		known[strings.ToLower(t.Repo)] = t.Repo
		known[strings.ToLower(t.FullName())] = t.Repo
	}
	var only, unknown []string
	for _, n := range names {
		if r, ok := known[strings.ToLower(strings.TrimSpace(n))]; ok {
			only = append(only, r)
		} else {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("--repo %s: no target repo of that name in the control repo %s (see fleetbot plan for the names)",
			strings.Join(unknown, ", "), revisionLabel(fl))
	}
	return only, nil
}

func revisionLabel(fl *app.Fleet) string {
	if fl.Repo.Revision != "" {
		return "at " + fl.Repo.Revision
	}
	return "(working tree)"
}
