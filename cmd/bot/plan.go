package main

import (
	"errors"
	"fmt"
	"io"

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
		detail              bool
	)
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what would change in every target repo, without writing",
		Long: `plan validates and renders the control repo and shows, per target repo, what
fleetbot would do. Without --forge it summarises the desired state (files,
objects per kind, access). With --forge it diffs against the real target
repos, one word per repo (the same in text, markdown, JSON and serve's metrics):
create, open, update, noop, cleanup (only a merged pull request's branch goes),
blocked (a human pushed to the bot branch), close, remove, deferred, failed or
skipped, with the files and objects that change.
plan never writes. The text lists the repos that change (--detail: every repo,
and without --forge every file) and ends with the summary line.

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
				return writeDesiredPlan(a.stdout, format, report.View{Detail: detail}, f)
			}
			out, err := a.forgePlan(cmd, f, format, report.View{Detail: detail}, allowRemovals, allowAccessRemovals)
			if err != nil {
				return err
			}
			if detailed {
				return exitCode(out.ExitCode(false))
			}
			return nil
		},
	}
	formatVar(cmd.Flags(), &format, formats())
	detailVar(cmd.Flags(), &detail)
	a.registerGitURL(cmd.Flags())
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (e.g. a component selector matching no cluster) as errors")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing would change, 2 when something would, 3 when a repo waits for a human, 1 on error")
	cmd.Flags().BoolVar(&allowRemovals, "allow-removals", false, "plan as if --allow-removals were given to apply")
	cmd.Flags().BoolVar(&allowAccessRemovals, "allow-access-removals", false, "plan as if --allow-access-removals were given to apply")
	return cmd
}

// writeDesiredPlan prints the offline plan: the desired state of every target repo, compact
// (one row per repo) unless v.Detail, then the rollout's waves, then its summary line.
func writeDesiredPlan(w io.Writer, format string, v report.View, f *app.Fleet) error {
	p, err := app.BuildDesiredPlan(f)
	if err != nil {
		return err
	}
	d := report.New(report.CommandPlan, p.Source, nil)
	d.Desired = p.Repos
	switch format {
	case formatJSON:
		return d.WriteJSON(w)
	case formatMarkdown:
		return d.WriteDesiredMarkdown(w)
	}
	if err := d.WriteDesiredText(w, v); err != nil {
		return err
	}
	writeWaveGroups(w, f)
	_, err = fmt.Fprintln(w, d.DesiredSummaryLine(v))
	return err
}
