package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

func (a *frontend) validateCommand() *cobra.Command {
	var strict bool
	var format string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the control repo: schema, references, values, selectors and a full render",
		Long: `validate loads the whole control repo, checks every object (strict fields,
names, references, scopes, values, selectors, repo names) and renders every
target, without writing anything. Every problem is listed with file:line and
a hint; the exit status is 1 when there is any. Warnings (valid, but almost
always a mistake, such as a component selector that matches no cluster) are
printed too, each once with the places it concerns; --strict makes them errors.
With -o json: fleetbot's report (command "validate") with the problems in
errors, the warnings in warnings and what a valid repo renders in validated.`,
		Example: `  fleetbot validate --control path/to/control-repo
  # warnings (a component selector matching no cluster) fail too
  fleetbot validate --control . --strict
  fleetbot validate --control . -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.load(cmd.Context())
			if format == formatJSON {
				return a.validateJSON(f, err, strict)
			}
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if err := a.warnings(f, strict); err != nil {
				return err
			}
			v := validated(f)
			fmt.Fprintf(a.stdout, "control repo %s is valid: %d cluster repo(s), %d workspace repo(s)", a.control, v.Clusters, v.Workspaces)
			if v.Management > 0 {
				fmt.Fprintf(a.stdout, ", %d management repo(s)", v.Management)
			}
			fmt.Fprintf(a.stdout, ", %d app(s)", v.Apps)
			if n := len(f.Repo.Warnings); n > 0 {
				fmt.Fprintf(a.stdout, "; %d warning(s)", n)
			}
			fmt.Fprintln(a.stdout)
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (e.g. a component selector matching no cluster) as errors")
	formatVar(cmd.Flags(), &format, []string{formatText, formatJSON})
	return cmd
}

// validated counts what a valid control repo renders.
func validated(f *app.Fleet) *report.Validated {
	v := &report.Validated{Apps: len(f.Repo.Apps)}
	for _, t := range f.Targets {
		switch t.Kind {
		case "cluster":
			v.Clusters++
		case "workspace":
			v.Workspaces++
		default:
			v.Management++
		}
	}
	return v
}

// validateJSON prints validate's report: the problems of an invalid control repo (and exit 1),
// or what a valid one renders, with its warnings (errors under --strict).
func (a *frontend) validateJSON(f *app.Fleet, loadErr error, strict bool) error {
	issues, invalid := app.ControlProblems(loadErr)
	if loadErr != nil && !invalid {
		return app.DescribeLoadError(a.control, loadErr) // unreadable: no repo to report on
	}
	d := report.New(report.CommandValidate, workcopy.Revision(a.control), nil)
	d.Errors = problems(issues)
	if f != nil {
		if strict {
			d.Errors = append(d.Errors, problems(f.Repo.Warnings)...)
		} else {
			d.Warnings = problems(f.Repo.Warnings)
		}
		if len(d.Errors) == 0 {
			d.Validated = validated(f)
		}
	}
	if err := d.WriteJSON(a.stdout); err != nil {
		return err
	}
	if len(d.Errors) > 0 {
		return exitCode(report.ClassInvalidInput.ExitCode())
	}
	return nil
}

// problems are control repo issues as the report carries them.
func problems(is app.Issues) []report.Problem {
	out := make([]report.Problem, 0, len(is))
	for _, i := range is {
		out = append(out, report.Problem{File: i.Pos.File, Line: i.Pos.Line, Message: i.Message, Hint: i.Hint})
	}
	return out
}

// warnings prints the control repo's warnings on stderr, each text once with the places it
// concerns (the same warning for 543 clusters is one entry); with strict they are the
// command's error (exit 1).
func (a *frontend) warnings(f *app.Fleet, strict bool) error {
	if len(f.Repo.Warnings) == 0 {
		return nil
	}
	if strict {
		return fmt.Errorf("--strict: %w", f.Repo.Warnings)
	}
	for _, w := range report.FoldProblems(problems(f.Repo.Warnings)) {
		fmt.Fprintln(a.progress(), "warning: "+w.String())
	}
	return nil
}
