package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"
)

// renderMarker marks a directory written by "fleetbot render", so a rerun may
// replace it and no other directory is ever cleared.
const renderMarker = ".fleetbot-render"

func (a *app) renderCommand() *cobra.Command {
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
			f, err := loadFleet(a.control)
			if err != nil {
				return describeLoadError(a.control, err)
			}
			if err := prepareOut(out); err != nil {
				return err
			}
			files := 0
			for _, t := range f.targets {
				tree := make(map[string][]byte, len(t.Files)+len(t.Scaffolds))
				for p, c := range t.Scaffolds {
					tree[p] = c
				}
				for p, c := range t.Files {
					tree[p] = c
				}
				if err := writeTree(filepath.Join(out, t.Repo), tree); err != nil {
					return err
				}
				files += len(tree)
			}
			if err := os.WriteFile(filepath.Join(out, renderMarker), []byte("written by fleetbot render\n"), 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", filepath.Join(out, renderMarker), err)
			}
			fmt.Fprintf(a.stdout, "rendered %d repo(s), %d file(s) into %s\n", len(f.targets), files, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write one folder per target repo into (required)")
	return cmd
}

// prepareOut makes out an empty directory, clearing it only when an earlier
// render wrote it.
func prepareOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case os.IsNotExist(err):
		return os.MkdirAll(out, 0o755)
	case err != nil:
		return fmt.Errorf("reading --out %s: %w", out, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, renderMarker)); err != nil {
		return fmt.Errorf("--out %s is not empty and was not written by fleetbot render; choose an empty or new directory", out)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return fmt.Errorf("clearing earlier render in %s: %w", out, err)
		}
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
