package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Output formats of plan-like commands.
const (
	formatText     = "text"
	formatMarkdown = "markdown"
	formatJSON     = "json"
)

func (a *frontend) planCommand() *cobra.Command {
	var (
		format              string
		detailed            bool
		strict              bool
		allowRemovals       bool
		allowAccessRemovals bool
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what would change in every target repo, without writing",
		Long: `plan validates and renders the control repo and shows, per target repo, what
fleetbot would do. Without --forge it summarises the desired state (files,
objects per kind, access). With --forge it diffs against the real target
repos, one word per repo (the same in text, markdown, JSON and serve's metrics):
create, open, update, noop, blocked (a human pushed to the bot branch), close,
remove, deferred, failed or skipped, with the files and objects that change.
plan never writes.

--detailed-exitcode (with --forge): 0 no changes, 1 error, 2 changes pending,
3 blocked (a repo waits for a human: someone pushed to its bot branch).`,
		Example: `  # the desired state only, offline
  fleetbot plan --control .
  # the real diff against the target repos on the local forge, or on GitHub
  fleetbot plan --control . --forge local:.fleetbot/forge
  fleetbot plan --control . --forge github --app-id 123456 --app-key private-key.pem
  # in CI: exit 2 when something would change
  fleetbot plan --forge github --detailed-exitcode -o json > plan.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.load(cmd.Context())
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if err := a.warnings(f, strict); err != nil {
				return err
			}
			if a.forge == "" {
				if detailed {
					return errors.New("--detailed-exitcode needs --forge: without it plan shows the desired state and cannot tell whether anything would change")
				}
				if err := writeDesiredPlan(a.stdout, format, f); err != nil || format != formatText {
					return err
				}
				writeWaveGroups(a.stdout, f)
				return nil
			}
			report, err := a.forgePlan(cmd, f, format, allowRemovals, allowAccessRemovals)
			if err != nil {
				return err
			}
			if format == formatText && report.Rollout() != nil {
				fmt.Fprintln(a.stdout)
				if err := writeRolloutStatus(a.stdout, report.Rollout()); err != nil {
					return err
				}
			}
			if detailed {
				return exitCode(report.ExitCode(false))
			}
			return nil
		},
	}
	formatVar(cmd.Flags(), &format, formats())
	a.registerGitURL(cmd.Flags())
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (e.g. a component selector matching no cluster) as errors")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing would change, 2 when something would, 3 when a repo waits for a human, 1 on error")
	cmd.Flags().BoolVar(&allowRemovals, "allow-removals", false, "plan as if --allow-removals were given to apply")
	cmd.Flags().BoolVar(&allowAccessRemovals, "allow-access-removals", false, "plan as if --allow-access-removals were given to apply")
	return cmd
}

func writeDesiredPlan(w io.Writer, format string, f *app.Fleet) error {
	p, err := app.BuildDesiredPlan(f)
	if err != nil {
		return err
	}
	switch format {
	case formatJSON:
		d := report.New(report.CommandPlan, p.Source, nil)
		d.Desired = p.Repos
		return d.WriteJSON(w)
	case formatMarkdown:
		fmt.Fprintf(w, "### fleetbot plan (desired state)\n\nSource: `%s`\n\n", sourceLabel(p.Source))
		fmt.Fprintln(w, "| repo | kind | files | objects | access |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, r := range p.Repos {
			fmt.Fprintf(w, "| `%s` | %s | %d managed, %d scaffold | %s | %s |\n", r.Repo, r.Kind,
				len(r.Files), len(r.Scaffolds), r.ObjectCounts(), app.FormatTeams(r.Teams))
		}
		return nil
	default:
		fmt.Fprintf(w, "fleetbot plan: desired state of %d target repo(s) from %s\n", len(p.Repos), sourceLabel(p.Source))
		fmt.Fprintln(w, "(offline: pass --forge to diff against the target repos)")
		for _, r := range p.Repos {
			fmt.Fprintf(w, "\n%s  (%s %s)\n", r.Repo, r.Kind, r.Name)
			fmt.Fprintf(w, "  files:    %d managed, %d scaffold\n", len(r.Files), len(r.Scaffolds))
			for _, f := range r.Files {
				fmt.Fprintf(w, "            %s\n", f)
			}
			fmt.Fprintf(w, "  objects:  %s\n", r.ObjectCounts())
			for _, c := range slices.Sorted(maps.Keys(r.Needs)) {
				fmt.Fprintf(w, "  needs:    %s: %s from the cluster (neither it nor a component it depends on renders the CRD; until the cluster has it, Kustomization platform-%s fails, and what depends on it waits)\n",
					c, strings.Join(r.Needs[c], ", "), c)
			}
			fmt.Fprintf(w, "  access:   %s\n", app.FormatTeams(r.Teams))
			fmt.Fprintf(w, "  review:   %s\n", strings.Join(r.Reviewers, ", "))
		}
		return nil
	}
}

func sourceLabel(rev string) string {
	if rev == "" {
		return "working tree (not a git checkout)"
	}
	return rev
}
