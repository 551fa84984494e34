package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// rolloutCommand is `fleetbot rollout`: where a rollout in waves stands (read-only), and
// pausing and resuming it in the control repo.
func (a *frontend) rolloutCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rollout",
		Short: "Show where the rollout of the control repo's revision stands, wave by wave; pause, resume, approve, skip or roll it back",
		Example: `  fleetbot rollout status --control . --forge github
  fleetbot rollout pause --control . --reason "canary alerts"
  fleetbot rollout resume --control .
  fleetbot rollout approve prod --control . --note "canary looked fine"
  fleetbot rollout skip edge-7 --control . --note "being rebuilt"
  fleetbot rollout rollback --control . --note "INC-1234"`,
	}
	var format string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each rollout wave's state, the clusters held and why (read-only)",
		Long: `rollout status plans the control repo against --forge, as plan does, and prints
the rollout gate's verdict for its revision: each wave (done, soaking, active, waiting,
halted, paused) with its clusters changed, merged and healthy, the clusters whose pull
request is held and why, and a halt. It never writes. With -o json: fleetbot's report
(command "rollout") with the verdict in its rollout section.`,
		Example: `  fleetbot rollout status --control . --forge local:.fleetbot/forge
  fleetbot rollout status --control . --forge github --app-id 123456 --app-key private-key.pem
  fleetbot rollout status --control . --forge github -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.load(cmd.Context())
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if !f.Rollouts().Enabled() {
				if format == formatJSON {
					return report.New(report.CommandRollout, f.Repo.Revision, nil).WriteJSON(a.stdout)
				}
				fmt.Fprintln(a.stdout, "no rollout waves declared (platform spec.rollout.waves, or a component's rollout.waves): every change reaches every cluster at once")
				return nil
			}
			if a.forge == "" {
				return errors.New("rollout status needs --forge: the rollout's state is read from the target repos' pull requests and commit statuses")
			}
			log, err := a.logger()
			if err != nil {
				return err
			}
			runner, err := a.openRunner(cmd.Context(), a.forge, f.Owner(), true, log)
			if err != nil {
				return err
			}
			defer runner.Close()
			out, err := runner.Run(cmd.Context(), f, app.Request{Mode: app.ModePlan, Trigger: app.TriggerCLI, Step: a.progress().step})
			a.progress().end()
			if err != nil {
				return err
			}
			if out == nil || out.Rollout == nil {
				return errors.New("the plan reported no rollout state")
			}
			plan := out.Document()
			if format == formatJSON {
				d := report.New(report.CommandRollout, plan.Source, nil)
				d.Rollout = plan.Rollout
				return d.WriteJSON(a.stdout)
			}
			return plan.Rollout.WriteText(a.stdout)
		},
	}
	a.registerGitURL(status.Flags())
	formatVar(status.Flags(), &format, []string{formatText, formatJSON})

	root.AddCommand(status, a.rolloutPauseCommand(), a.rolloutResumeCommand(),
		a.rolloutApproveCommand(), a.rolloutSkipCommand(), a.rolloutRollbackCommand())
	return root
}

// rolloutPauseCommand is `fleetbot rollout pause` (app.PauseRollout).
func (a *frontend) rolloutPauseCommand() *cobra.Command {
	var reason string
	var noCommit bool
	pause := &cobra.Command{
		Use:   "pause",
		Short: "Pause every rollout: write rollout/paused in the control repo and commit it",
		Long: `rollout pause writes rollout/paused in the control repo (--control) with --reason,
and commits that one file when --control is in a git work tree (unless --no-commit).
Once the commit reaches the control repo's default branch, every front end (apply,
the Action, serve) honours it: no new rollout wave starts, no new pull request opens
in a cluster repo and fleetbot enables no auto-merge; open pull requests are still
updated in place. rollout status and plan show the pause and its reason.`,
		Example: `  fleetbot rollout pause --control . --reason "canary alerts: INC-1234"
  # write the file only; commit it yourself
  fleetbot rollout pause --control . --reason "freeze" --no-commit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := app.PauseRollout(a.control, reason, !noCommit)
			if err != nil {
				return err
			}
			writePauseResult(a.stdout, "paused", "written", "the rollout is already paused for that reason", res)
			return nil
		},
	}
	pause.Flags().StringVar(&reason, "reason", "", "why the rollout is paused (the text of rollout/paused, shown by rollout status, plan and every held repo)")
	pause.Flags().BoolVar(&noCommit, "no-commit", false, "write rollout/paused without committing it")
	return pause
}

// rolloutResumeCommand is `fleetbot rollout resume` (app.ResumeRollout).
func (a *frontend) rolloutResumeCommand() *cobra.Command {
	var noCommit bool
	resume := &cobra.Command{
		Use:   "resume",
		Short: "Resume the rollout: remove rollout/paused from the control repo and commit that",
		Long: `rollout resume removes rollout/paused from the control repo (--control) and commits
the removal when --control is in a git work tree (unless --no-commit). Once it reaches
the default branch, the rollout continues where it stopped, from what the forge shows.`,
		Example: `  fleetbot rollout resume --control .
  fleetbot rollout resume --control . --no-commit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := app.ResumeRollout(a.control, !noCommit)
			if err != nil {
				return err
			}
			writePauseResult(a.stdout, "resumed", "removed", "the rollout is not paused (no rollout/paused)", res)
			return nil
		},
	}
	resume.Flags().BoolVar(&noCommit, "no-commit", false, "remove rollout/paused without committing the removal")
	return resume
}

// rolloutRecordCommand is one of `fleetbot rollout approve|skip|rollback`: it loads the
// control repo (for its content digest), writes the record with run and says what it did.
func (a *frontend) rolloutRecordCommand(cmd *cobra.Command, run func(f *app.Fleet, args []string, note string, commit bool) (app.RecordResult, error)) *cobra.Command {
	var note, format string
	var noCommit bool
	cmd.RunE = func(c *cobra.Command, args []string) error {
		f, err := a.load(c.Context())
		if err != nil {
			return app.DescribeLoadError(a.control, err)
		}
		res, err := run(f, args, note, !noCommit)
		if err != nil {
			return err
		}
		if format == formatJSON {
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		writeRecordResult(a.stdout, res)
		return nil
	}
	cmd.Flags().StringVar(&note, "note", "", "why (the record's note, shown to the people reviewing it)")
	cmd.Flags().BoolVar(&noCommit, "no-commit", false, "write the record without committing it")
	formatVar(cmd.Flags(), &format, []string{formatText, formatJSON})
	return cmd
}

// rolloutApproveCommand is `fleetbot rollout approve WAVE` (app.ApproveWave).
func (a *frontend) rolloutApproveCommand() *cobra.Command {
	return a.rolloutRecordCommand(&cobra.Command{
		Use:   "approve WAVE",
		Short: "Approve a wave with approval: required: write rollout/approvals/WAVE.yaml and commit it",
		Long: `rollout approve writes rollout/approvals/WAVE.yaml in the control repo (--control) with
the digest of the control repo's content, and commits that one file when --control is in
a git work tree (unless --no-commit). Push it through a pull request: once it reaches the
default branch, the wave starts as soon as the waves before it are done. The approval
applies to this content only: a later commit that changes what the control repo renders
needs a new one. Who may approve is who may merge the file: its code owners in the
control repo's CODEOWNERS (fleetbot check control judges the commit's author).`,
		Example: `  fleetbot rollout approve prod --control . --note "canary looked fine"
  fleetbot rollout approve prod --control . -o json`,
		Args: cobra.ExactArgs(1),
	}, func(f *app.Fleet, args []string, note string, commit bool) (app.RecordResult, error) {
		return app.ApproveWave(a.control, f.Repo, args[0], note, commit)
	})
}

// rolloutSkipCommand is `fleetbot rollout skip CLUSTER` (app.SkipCluster).
func (a *frontend) rolloutSkipCommand() *cobra.Command {
	return a.rolloutRecordCommand(&cobra.Command{
		Use:   "skip CLUSTER",
		Short: "Leave a cluster out of the rollout of this content: write rollout/skips/CLUSTER.yaml and commit it",
		Long: `rollout skip writes rollout/skips/CLUSTER.yaml in the control repo (--control) with the
digest of the control repo's content, and commits that one file (unless --no-commit).
Once it reaches the default branch, the rollout leaves the cluster out: no new pull
request opens there, its wave does not wait for its health, and it does not count
against the wave's failure budget (an open pull request is still updated). The skip
lapses with the next commit that changes what the control repo renders.`,
		Example: `  fleetbot rollout skip edge-7 --control . --note "switched off for maintenance"
  fleetbot rollout skip edge-7 --control . --no-commit`,
		Args: cobra.ExactArgs(1),
	}, func(f *app.Fleet, args []string, note string, commit bool) (app.RecordResult, error) {
		return app.SkipCluster(a.control, f.Repo, args[0], note, commit)
	})
}

// rolloutRollbackCommand is `fleetbot rollout rollback` (app.RollBack).
func (a *frontend) rolloutRollbackCommand() *cobra.Command {
	return a.rolloutRecordCommand(&cobra.Command{
		Use:   "rollback",
		Short: "Mark the control repo's content rolled back: write rollout/rollback.yaml and commit it",
		Long: `rollout rollback writes rollout/rollback.yaml in the control repo (--control) with the
digest of the control repo's content, and commits that one file (unless --no-commit).
Once it reaches the default branch, every front end holds the rollout of this content
everywhere: no new pull request opens for it (open ones are still updated), the next apply
opens a pull request on every repo whose newest merge carries it, restoring the content of
the last merge that was healthy there, and rollout status, the check run and the status
page say it was rolled back and why (--note). The
mark lapses with the next commit that changes what the control repo renders, such as
the revert of the failed change, which rolls out as a new revision.`,
		Example: `  fleetbot rollout rollback --control . --note "INC-1234: canary p99 doubled"
  fleetbot rollout rollback --control . -o json`,
		Args: cobra.NoArgs,
	}, func(f *app.Fleet, _ []string, note string, commit bool) (app.RecordResult, error) {
		return app.RollBack(a.control, f.Repo, note, commit)
	})
}

// writeRecordResult says what rollout approve, skip or rollback did and what is left to do.
func writeRecordResult(w io.Writer, res app.RecordResult) {
	switch {
	case !res.Changed:
		fmt.Fprintf(w, "%s is already recorded for this content: nothing written\n", res.File)
	case res.Commit != "":
		fmt.Fprintf(w, "%s written and committed as %s", res.File, res.Commit[:min(12, len(res.Commit))])
		if res.Branch != "" {
			fmt.Fprintf(w, " on %s", res.Branch)
		}
		fmt.Fprintf(w, "; push it to the control repo's default branch (through a pull request its code owners review): it takes effect with the first run that reads that commit\n")
	default:
		fmt.Fprintf(w, "%s written; commit that and push it to the control repo's default branch: it takes effect with the first run that reads that commit\n", res.File)
	}
}

// writePauseResult says what rollout pause or resume did and what is left to do.
func writePauseResult(w io.Writer, done, how, nothing string, res app.PauseResult) {
	switch {
	case !res.Changed:
		fmt.Fprintf(w, "%s: nothing written\n", nothing)
	case res.Commit != "":
		fmt.Fprintf(w, "rollout %s: %s %s and committed as %s", done, res.File, how, res.Commit[:min(12, len(res.Commit))])
		if res.Branch != "" {
			fmt.Fprintf(w, " on %s", res.Branch)
		}
		fmt.Fprintf(w, "; push it to the control repo's default branch (directly or through a pull request): it takes effect with the first run that reads that commit\n")
	default:
		fmt.Fprintf(w, "rollout %s: %s %s; commit that and push it to the control repo's default branch: it takes effect with the first run that reads that commit\n", done, res.File, how)
	}
}

// writeWaveGroups prints which clusters each declared wave takes (the offline plan): the
// fleet's waves, each component's own, and a pause.
func writeWaveGroups(w io.Writer, f *app.Fleet) {
	repo, ro := f.Repo, f.Rollouts()
	if !ro.Enabled() {
		return
	}
	list := func(waves []app.PlannedWave) {
		for i, g := range waves {
			list := strings.Join(g.Clusters, ", ")
			if list == "" {
				list = "(no cluster)"
			}
			fmt.Fprintf(w, "  %d. %s: %s\n", i+1, g.Name, list)
		}
	}
	if len(repo.Platform.Spec.Rollout.Waves) > 0 {
		fmt.Fprintln(w, "\nrollout waves (a change reaches them in this order; pass --forge for their state):")
		list(ro.Plan(nil, true).Waves)
	} else {
		fmt.Fprintln(w, "\nrollout waves: none fleet-wide (a change to anything but the components below reaches every cluster at once)")
	}
	for _, comp := range repo.Platform.Spec.Components {
		if comp.Rollout == nil {
			continue
		}
		fmt.Fprintf(w, "component %s has its own waves (a change to it alone takes them; with other changes, these then spec.rollout.waves, combined):\n", comp.App)
		list(ro.Plan([]string{comp.App}, false).Waves)
	}
	if p := repo.Paused; p != nil {
		fmt.Fprintf(w, "rollout paused (%s)%s: no new wave starts; fleetbot rollout resume continues it\n", app.PausedFile, noteOf(p.Reason))
	}
}

// noteOf is ": note", or "" without one.
func noteOf(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}
