package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// exitBlocked is status's exit code when a repo is blocked on a human (DESIGN: 3).
const exitBlocked = 3

// statusFlags are the flags of fleetbot status.
type statusFlags struct {
	format, selector, groupBy string
	blocked                   bool
	repos                     []string
}

func (a *frontend) statusCommand() *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet at a glance: per target repo its revision, open PR and what it waits on, Flux health, drift",
		Long: `status plans every target repo against the forge (read-only, the cost of a
no-op plan: on GitHub one GraphQL query per 100 repos) and shows one row per
repo: kind, labels, state (in-sync, pr-open, pending, blocked, deferred,
failed, skipped), the control-repo revision rendered, the open pull request with its age and what it waits on
(review, checks, merge, human edit, budget), the control-repo revision last
merged, Flux health (the commit status of the default branch head; "unknown"
on the local forge), and drift (access, CODEOWNERS), then a summary line.

Exit status: 0, 3 when a shown repo is blocked on a human (someone pushed to
fleetbot's branch), 1 on error (including a repo that could not be read).
Without --forge it reads local:.fleetbot/forge.`,
		Example: `  fleetbot status --control testdata/control
  fleetbot status --control . --forge github --selector 'env=prod,region in (eu)' --group-by label:region
  # only the repos blocked on a human, as JSON
  fleetbot status --control . --forge github --blocked -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.status(cmd, &f)
		},
	}
	fs := cmd.Flags()
	a.registerGitURL(fs)
	fs.StringVarP(&f.format, "format", "o", formatText, "output format: text or json")
	fs.StringVar(&f.selector, "selector", "", "only repos whose cluster (or workspace) labels match this Kubernetes label selector, e.g. env=prod,region in (eu,us)")
	fs.BoolVar(&f.blocked, "blocked", false, "only repos blocked on a human")
	fs.StringSliceVar(&f.repos, "repo", nil, "only these target repos (name or owner/name; repeat or comma-separate); only they are read")
	fs.StringVar(&f.groupBy, "group-by", "kind", "group of the summary: kind, wave or label:KEY")
	return cmd
}

func (a *frontend) status(cmd *cobra.Command, f *statusFlags) error {
	if f.format != formatText && f.format != formatJSON {
		return fmt.Errorf("--format %q: want text or json", f.format)
	}
	sel, err := app.ParseStatusSelector(f.selector)
	if err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	group, err := app.ParseStatusGroupBy(f.groupBy)
	if err != nil {
		return fmt.Errorf("--group-by: %w", err)
	}
	fl, err := a.load(cmd.Context())
	if err != nil {
		return app.DescribeLoadError(a.control, err)
	}
	only, err := onlyRepos(fl, f.repos)
	if err != nil {
		return err
	}
	log, err := a.logger()
	if err != nil {
		return err
	}
	spec := firstNonEmpty(a.forge, app.DefaultLocalForge)
	owner := fl.Repo.Platform.Spec.Owner
	targets, err := a.openTargets(cmd.Context(), spec, owner, true, log)
	if err != nil {
		return err
	}
	defer targets.Close()
	opts := app.StatusOptions{Only: only, Selector: sel, Blocked: f.blocked, GroupBy: group, Now: time.Now(), Logger: log, Step: a.progress().step}
	if spec == "github" {
		root := app.ResolveGitURL("", app.ForgeGitHub, a.apiURL())
		opts.RepoURL = func(full string) string { return root + "/" + full }
	}
	view, err := targets.Status(cmd.Context(), fl, opts)
	a.progress().end()
	if err != nil {
		return err
	}
	if f.format == formatJSON {
		err = view.WriteJSON(a.stdout)
	} else {
		err = view.WriteText(a.stdout)
	}
	if err != nil {
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
