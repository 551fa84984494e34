package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

func (a *frontend) validateCommand() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the control repo: schema, references, values, selectors and a full render",
		Long: `validate loads the whole control repo, checks every object (strict fields,
names, references, scopes, values, selectors, repo names) and renders every
target, without writing anything. Every problem is listed with file:line and
a hint; the exit status is 1 when there is any. Warnings (valid, but almost
always a mistake, such as a component selector that matches no cluster) are
printed too; --strict makes them errors.`,
		Example: `  fleetbot validate --control path/to/control-repo
  # warnings (a component selector matching no cluster) fail too
  fleetbot validate --control . --strict`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := a.load(cmd.Context())
			if err != nil {
				return app.DescribeLoadError(a.control, err)
			}
			if err := a.warnings(f, strict); err != nil {
				return err
			}
			clusters, workspaces := 0, 0
			for _, t := range f.Targets {
				if t.Kind == "cluster" {
					clusters++
				} else {
					workspaces++
				}
			}
			fmt.Fprintf(a.stdout, "control repo %s is valid: %d cluster repo(s), %d workspace repo(s), %d app(s)\n",
				a.control, clusters, workspaces, len(f.Repo.Apps))
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (e.g. a component selector matching no cluster) as errors")
	return cmd
}

// warnings prints the control repo's warnings on stderr; with strict they are the command's
// error (exit 1).
func (a *frontend) warnings(f *app.Fleet, strict bool) error {
	if len(f.Repo.Warnings) == 0 {
		return nil
	}
	if strict {
		return fmt.Errorf("--strict: %w", f.Repo.Warnings)
	}
	for _, w := range f.Repo.Warnings {
		fmt.Fprintln(a.stderr, "warning: "+w.String())
	}
	return nil
}
