package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) validateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the control repo: schema, references, values, selectors and a full render",
		Long: `validate loads the whole control repo, checks every object (strict fields,
names, references, scopes, values, selectors, repo names) and renders every
target, without writing anything. Every problem is listed with file:line and
a hint; the exit status is 1 when there is any.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := loadFleet(a.control)
			if err != nil {
				return describeLoadError(a.control, err)
			}
			clusters, workspaces := 0, 0
			for _, t := range f.targets {
				if t.Kind == "cluster" {
					clusters++
				} else {
					workspaces++
				}
			}
			fmt.Fprintf(a.stdout, "control repo %s is valid: %d cluster repo(s), %d workspace repo(s), %d app(s)\n",
				a.control, clusters, workspaces, len(f.repo.Apps))
			return nil
		},
	}
}
