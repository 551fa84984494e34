package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// renderMarker marks a directory written by "fleetbot render", so a rerun may
// replace it and no other directory is ever cleared.
const renderMarker = ".fleetbot-render"

func (a *frontend) renderCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "render --out DIR",
		Short: "Write the desired tree of every target repo into DIR/<repo>/",
		Long: `render writes one folder per target repo holding its desired tree (managed
files and scaffolds) as a new repo would get it. Nothing is written when the
control repo has any problem. DIR must be empty, missing, or an earlier
render output (which is replaced).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required: the directory to write the rendered repos into")
			}
			ctx := cmd.Context()
			f, err := a.load(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("render interrupted (%w): %s is unchanged", context.Cause(ctx), out)
				}
				return app.DescribeLoadError(a.control, err)
			}
			if err := checkOut(out); err != nil {
				return err
			}
			// Written beside out and moved into place at the end: an interrupted or failed
			// render leaves out as it was, never a half-written tree that looks complete.
			tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), "."+filepath.Base(filepath.Clean(out))+".render-*")
			if err != nil {
				return fmt.Errorf("creating a directory beside --out %s: %w", out, err)
			}
			defer os.RemoveAll(tmp)
			files := 0
			for _, t := range f.Targets {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("render interrupted (%w): %s is unchanged", context.Cause(ctx), out)
				}
				tree := make(map[string][]byte, len(t.Files)+len(t.Scaffolds))
				for p, c := range t.Scaffolds {
					tree[p] = c
				}
				for p, c := range t.Files {
					tree[p] = c
				}
				if err := writeTree(filepath.Join(tmp, t.Repo), tree); err != nil {
					return err
				}
				files += len(tree)
			}
			if err := os.WriteFile(filepath.Join(tmp, renderMarker), []byte("written by fleetbot render\n"), 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", renderMarker, err)
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("render interrupted (%w): %s is unchanged", context.Cause(ctx), out)
			}
			if err := replaceDir(out, tmp); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "rendered %d repo(s), %d file(s) into %s\n", len(f.Targets), files, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write one folder per target repo into (required)")
	a.registerGitURL(cmd.Flags())
	return cmd
}

// checkOut refuses an out that is neither missing, empty, nor an earlier render's output.
func checkOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading --out %s: %w", out, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, renderMarker)); err != nil {
		return fmt.Errorf("--out %s is not empty and was not written by fleetbot render; choose an empty or new directory", out)
	}
	return nil
}

// replaceDir moves the finished render tmp to out, replacing an earlier render (or an empty
// directory) with two renames, so out is at every moment either the old tree or the new one.
func replaceDir(out, tmp string) error {
	old := ""
	if _, err := os.Stat(out); err == nil {
		old = tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			return fmt.Errorf("moving the earlier render %s aside: %w", out, err)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		if old != "" {
			_ = os.Rename(old, out)
		}
		return fmt.Errorf("moving the render into %s: %w", out, err)
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// writeTree writes path → content below dir, in sorted order.
func writeTree(dir string, tree map[string][]byte) error {
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !filepath.IsLocal(filepath.FromSlash(p)) {
			return fmt.Errorf("refusing to write %q: the path leaves %s", p, dir)
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(full), err)
		}
		if err := os.WriteFile(full, tree[p], 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", full, err)
		}
	}
	return nil
}
