package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/action"
)

func (a *frontend) actionCommand() *cobra.Command { return a.newActionCommand(os.Getenv) }

// newActionCommand builds `fleetbot action` reading the runner's environment through getenv,
// so tests give it a simulated runner without touching the process environment.
func (a *frontend) newActionCommand(getenv func(string) string) *cobra.Command {
	return &cobra.Command{
		Use:   "action",
		Short: "Run as a GitHub Actions step (action.yml): plan, apply, check-workspace or check-cluster",
		Long:  action.Help,
		Example: `  # in a workflow step, what action.yml runs
  fleetbot action
  # on your machine: the runner's environment by hand (docs/action.md)
  GITHUB_EVENT_NAME=pull_request GITHUB_EVENT_PATH=event.json INPUT_MODE=plan fleetbot action`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := a.logger()
			if err != nil {
				return err
			}
			return action.Run(cmd.Context(), action.Options{
				Stdout: a.stdout, Stderr: a.stderr, Getenv: getenv, Logger: log,
				Budget: a.github.budget(), CacheDir: a.github.cacheDir, GitURL: a.gitURLFlag, Version: version,
			})
		},
	}
}
