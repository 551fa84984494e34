package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// applyLong is the help text of apply.
const applyLong = `apply plans every target repo against the forge and then writes: it creates
missing repos (bootstrap commit with README, CODEOWNERS and scaffolds), opens
or updates one pull request per repo on the bot branch, closes PRs that are no
longer needed, and converges access settings. A repo that fails does not stop
the others; the run then exits 1 naming it. Without --forge, apply uses the
embedded local forge at ` + app.DefaultLocalForge + `.

With --forge github and a snapshot cache (--github-cache, on by default),
apply is incremental: it remembers in the cache what its last converged run
left every target repo at, and plans only the repos whose desired state
changed since (a cluster file: that cluster's repo and its workspace repos; a
catalog app: the repos running it; platform.yaml: every repo). Every
--full-every, after a failed run, or with --full, it plans every repo again,
which corrects changes made in target repos by hand.

The text is one table, printed when the run is done: the repos it changed or
that need a look (--detail: every repo), the access it converged, warnings once
each with the repos they concern, and last the summary line. On a terminal,
stderr shows the progress meanwhile (n of N repos, the rate, the time left).

--detailed-exitcode: 0 done, 1 error, 2 repos deferred to the next run (write
budget), 3 a repo waits for a human (someone pushed to its bot branch).`

func (a *frontend) applyCommand() *cobra.Command {
	var (
		allowRemovals       bool
		allowAccessRemovals bool
		format              string
		detailed            bool
		fullRun             bool
		detail              bool
	)
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Reconcile every target repo: create repos, open, update or close fleetbot's pull requests",
		Long:  applyLong,
		Example: `  # the embedded local forge (.fleetbot/forge): no GitHub needed
  fleetbot apply --control testdata/control
  # GitHub, as the App's installation; every repo, not only the changed ones
  fleetbot apply --control . --forge github --app-id 123456 --app-key private-key.pem --full
  # a fleet shrinking on purpose by more than spec.maxRemovals
  fleetbot apply --forge github --allow-removals`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := a.logger()
			if err != nil {
				return err
			}
			f, err := a.load(cmd.Context())
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if err := a.warnings(f, false); err != nil {
				return err
			}
			spec := a.forge
			if spec == "" {
				spec = app.DefaultLocalForge
			}
			runner, err := a.openRunner(cmd.Context(), spec, f.Owner(), false, log)
			if err != nil {
				return err
			}
			defer runner.Close()
			out, runErr := runner.Run(cmd.Context(), f, app.Request{
				Mode: app.ModeApply, Trigger: app.TriggerCLI, Full: fullRun,
				AllowRemovals: allowRemovals, AllowAccessRemovals: allowAccessRemovals,
				Step: a.progress().step,
			})
			a.progress().end()
			if out != nil && !issuesInText(format, out) {
				if err := writeReport(a.stdout, format, report.View{Detail: detail}, out); err != nil {
					return err
				}
			}
			if ctx := cmd.Context(); runErr != nil && ctx.Err() != nil && out != nil {
				return fmt.Errorf("interrupted (%v): %d of %d repos not applied; each repo is left where a run can resume: run apply again to finish",
					context.Cause(ctx), len(out.Failed()), len(out.Results))
			}
			if runErr == nil && detailed {
				return exitCode(out.ExitCode(true))
			}
			return runErr
		},
	}
	cmd.Flags().BoolVar(&allowRemovals, "allow-removals", false, "allow removing more cluster/workspace repos than platform spec.maxRemovals")
	cmd.Flags().BoolVar(&allowAccessRemovals, "allow-access-removals", false, "allow taking away more of a repo's grants than platform spec.access.maxAccessRemovals")
	minIntVar(cmd.Flags(), &a.concurrency, "concurrency", app.DefaultConcurrency, 1, "how many target repos to work on at once")
	cmd.Flags().BoolVar(&fullRun, "full", false, "plan every target repo, not only those whose desired state changed since the last converged run")
	cmd.Flags().DurationVar(&a.fullEvery, "full-every", app.DefaultFullEvery, "plan every target repo when the last full run is older than this (negative: only with --full or after a failure)")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when done, 2 when repos were deferred, 3 when a repo waits for a human, 1 on error")
	formatVar(cmd.Flags(), &format, formats())
	detailVar(cmd.Flags(), &detail)
	a.registerGitURL(cmd.Flags())
	return cmd
}

// forgePlan plans against the forge named by --forge; it reports whether
// anything would change.
func (a *frontend) forgePlan(cmd *cobra.Command, f *app.Fleet, format string, v report.View, allowRemovals, allowAccessRemovals bool) (*app.Result, error) {
	log, err := a.logger()
	if err != nil {
		return nil, err
	}
	runner, err := a.openRunner(cmd.Context(), a.forge, f.Owner(), true, log)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	out, err := runner.Run(cmd.Context(), f, app.Request{
		Mode: app.ModePlan, Trigger: app.TriggerCLI,
		AllowRemovals: allowRemovals, AllowAccessRemovals: allowAccessRemovals,
		Step: a.progress().step,
	})
	a.progress().end()
	if out != nil && !issuesInText(format, out) {
		if werr := writeReport(a.stdout, format, v, out); werr != nil {
			return nil, werr
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// issuesInText is true when a report carries control repo issues and the
// format is text: the error lists them, once.
func issuesInText(format string, r *app.Result) bool {
	return format == formatText && r.HasIssues()
}

// writeReport prints a plan's or an apply's report. The text lists the repos v asks for, the
// rollout's verdict when the control repo declares waves, and ends with the summary line.
func writeReport(w io.Writer, format string, v report.View, r *app.Result) error {
	d := r.Document()
	switch format {
	case formatJSON:
		return d.WriteJSON(w)
	case formatMarkdown:
		return d.WriteMarkdownView(w, v)
	}
	if d.Rollout != nil && len(d.Errors) == 0 {
		// The rollout's verdict goes above the report, whose summary line ends the output.
		if err := d.Rollout.WriteText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return d.WriteTextView(w, v)
}
