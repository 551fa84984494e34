package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
)

// devCommand groups tools for trying, developing and measuring fleetbot; README lists them.
func (a *frontend) devCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Tools for trying and measuring fleetbot: synthetic control repos, serving the local forge to Flux",
		Example: `  fleetbot dev generate --clusters 1000 --out /tmp/fleet
  fleetbot dev git-serve --forge local:.fleetbot/forge`,
		Args: cobra.NoArgs,
	}
	dev.AddCommand(a.devGenerateCommand(), a.devGitServeCommand())
	return dev
}

func (a *frontend) devGitServeCommand() *cobra.Command {
	var listen, listenFile string
	cmd := &cobra.Command{
		Use: "git-serve [--forge local:PATH] [--listen ADDR] [--listen-file FILE]",
		Example: `  fleetbot dev git-serve --forge local:.fleetbot/forge
  # a free port, written to a file for scripts
  fleetbot dev git-serve --listen 127.0.0.1:0 --listen-file /tmp/git-serve.addr`,
		Short: "Serve the local forge's repos read-only over git smart HTTP, for a Flux that should apply them",
		Long: `git-serve lets Flux (or git clone) read the repos of the local forge at
http://ADDR/<owner>/<repo>.git, read-only: pushes are refused, fleetbot apply
writes the forge. Render and apply with --git-url http://ADDR so the
workspace GitRepositories in flux/ point here; bootstrap Flux on a cluster
repo with the same URL. It runs until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := a.logger()
			if err != nil {
				return err
			}
			spec := firstNonEmpty(a.forge, app.DefaultLocalForge)
			path, ok := strings.CutPrefix(spec, "local:")
			if !ok || path == "" {
				return fmt.Errorf("--forge %q: git-serve serves a local forge, local:PATH", spec)
			}
			h, err := local.GitHandler(path, log)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			addr := ln.Addr().String()
			if listenFile != "" {
				if err := writeFileAtomic(listenFile, addr+"\n"); err != nil {
					_ = ln.Close()
					return fmt.Errorf("--listen-file: %w", err)
				}
			}
			fmt.Fprintf(a.stdout, "serving %s at http://%s/<owner>/<repo>.git (render and apply with --git-url http://%s)\n", path, addr, addr)
			return serveUntilDone(cmd.Context(), &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", app.DefaultGitServeListen, "address to listen on; 127.0.0.1:0 picks a free port")
	cmd.Flags().StringVar(&listenFile, "listen-file", "", "once listening, write the address (HOST:PORT) to this file")
	return cmd
}

// serveUntilDone serves on ln until ctx ends, then shuts down gracefully.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *frontend) devGenerateCommand() *cobra.Command {
	var (
		opts app.GenerateOptions
		out  string
	)
	cmd := &cobra.Command{
		Use: "generate --out DIR [--clusters N] [--workspaces W] [--apps A] [--seed S]",
		Example: `  # a fleet of 1,000 clusters, then its plan and apply on the local forge
  fleetbot dev generate --clusters 1000 --out /tmp/fleet
  fleetbot apply --control /tmp/fleet --forge local:/tmp/forge
  fleetbot dev generate --clusters 50 --workspaces 5 --apps 8 --seed 7 --out /tmp/small`,
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
			files, err := app.GenerateControlRepo(cmd.Context(), out, opts)
			if err != nil {
				return err
			}
			workspaces := opts.Workspaces
			if workspaces == 0 {
				workspaces = max(1, opts.Clusters/50)
			}
			fmt.Fprintf(a.stdout, "generated %d cluster(s), %d workspace(s) and %d app(s) (%d files) into %s\n",
				opts.Clusters, workspaces, opts.Apps, files, out)
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
