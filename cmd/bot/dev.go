package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// devCommand groups tools for trying, developing and measuring fleetbot; README lists them.
func (a *app) devCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Tools for trying and measuring fleetbot: synthetic control repos for load tests",
		Args:  cobra.NoArgs,
	}
	dev.AddCommand(a.devGenerateCommand())
	return dev
}

func (a *app) devGenerateCommand() *cobra.Command {
	var (
		opts fleetgen.Options
		out  string
	)
	cmd := &cobra.Command{
		Use:   "generate --out DIR [--clusters N] [--workspaces W] [--apps A] [--seed S]",
		Short: "Write a synthetic control repo of N clusters, W workspaces and A catalog apps into DIR",
		Long: `generate writes a valid control repo for trying fleetbot at fleet scale:
clusters with env/region/network labels and per-cluster values, workspaces
deploying namespaced catalog apps, and cluster-scoped platform components (a
quarter of the apps) chosen by label selectors. The same options and seed
always give the same files. DIR must be empty or missing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required: the directory to write the control repo into")
			}
			if opts.Clusters < 1 || opts.Apps < 1 || opts.Workspaces < 0 {
				return fmt.Errorf("--clusters and --apps must be at least 1 and --workspaces at least 0 (0: one per 50 clusters)")
			}
			entries, err := os.ReadDir(out)
			if err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("reading --out %s: %w", out, err)
			}
			if len(entries) > 0 {
				return fmt.Errorf("--out %s is not empty; choose an empty or new directory", out)
			}
			files := fleetgen.Generate(opts)
			if err := fleetgen.WriteDir(out, opts); err != nil {
				return err
			}
			workspaces := opts.Workspaces
			if workspaces == 0 {
				workspaces = max(1, opts.Clusters/50)
			}
			fmt.Fprintf(a.stdout, "generated %d cluster(s), %d workspace(s) and %d app(s) (%d files) into %s\n",
				opts.Clusters, workspaces, opts.Apps, len(files), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Clusters, "clusters", 100, "number of clusters")
	f.IntVar(&opts.Workspaces, "workspaces", 0, "number of workspaces (0: one per 50 clusters, at least 1)")
	f.IntVar(&opts.Apps, "apps", 20, "number of catalog apps; a quarter of them are platform components")
	f.Int64Var(&opts.Seed, "seed", 1, "random seed: the same options and seed give the same repo")
	f.StringVar(&out, "out", "", "directory to write the control repo into (required; empty or missing)")
	return cmd
}
