package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
		Example: `  fleetbot render --control testdata/control --out /tmp/rendered
  # what an apply on GitHub Enterprise would write into the Flux objects
  fleetbot render --control . --out rendered --git-url https://github.example.com`,
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
			files, err := writeRender(ctx, out, f.Targets, a.progress())
			if err != nil {
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

// writeRender writes the targets into a directory beside out and moves it into place at the
// end: an interrupted or failed render leaves out as it was, never a half-written tree that
// looks complete. A signal (ctx done) is honoured between any two files; what was written so far
// is not removed then (a large fleet's tree takes longer to delete than a signal may wait) but
// renamed to a .trash directory beside out, which the next render into out removes.
func writeRender(ctx context.Context, out string, targets []*app.Target, prog *progress) (int, error) {
	prog.stage("writing "+out, len(targets))
	defer prog.end()
	interrupted := func() error {
		return fmt.Errorf("render interrupted (%w): %s is unchanged", context.Cause(ctx), out)
	}
	clean := filepath.Clean(out)
	prefix := "." + filepath.Base(clean) + ".render-"
	if err := removeTrash(ctx, filepath.Dir(clean), prefix); err != nil {
		return 0, interrupted()
	}
	tmp, err := os.MkdirTemp(filepath.Dir(clean), prefix+"*")
	if err != nil {
		return 0, fmt.Errorf("creating a directory beside --out %s: %w", out, err)
	}
	done := false
	defer func() {
		if !done {
			discard(ctx, tmp)
		}
	}()
	files := 0
	for i, t := range targets {
		tree := make(map[string][]byte, len(t.Files)+len(t.Scaffolds))
		for p, c := range t.Scaffolds {
			tree[p] = c
		}
		for p, c := range t.Files {
			tree[p] = c
		}
		if err := writeTree(ctx, filepath.Join(tmp, t.Repo), tree); err != nil {
			if ctx.Err() != nil {
				return 0, interrupted()
			}
			return 0, err
		}
		files += len(tree)
		prog.set(i+1, len(targets))
	}
	if err := os.WriteFile(filepath.Join(tmp, renderMarker), []byte("written by fleetbot render\n"), 0o644); err != nil {
		return 0, fmt.Errorf("writing %s: %w", renderMarker, err)
	}
	if ctx.Err() != nil {
		return 0, interrupted()
	}
	old, err := replaceDir(out, tmp)
	if err != nil {
		return 0, err
	}
	done = true
	if old != "" {
		discard(ctx, old)
	}
	return files, nil
}

// trashSuffix ends the name of a directory a render no longer needs.
const trashSuffix = ".trash"

// discard removes dir, or, when ctx is done before it is gone, leaves the rest renamed to a
// .trash directory for the next render to remove: removing a large tree takes longer than a
// signal may wait.
func discard(ctx context.Context, dir string) {
	trash := dir
	if !strings.HasSuffix(dir, trashSuffix) {
		trash = dir + trashSuffix
		if os.Rename(dir, trash) != nil {
			trash = dir
		}
	}
	_ = removeAllContext(ctx, trash)
}

// removeTrash removes the .trash directories an earlier render into the same --out left beside
// it (prefix is ".<out>.render-"), unless ctx is done first.
func removeTrash(ctx context.Context, parent, prefix string) error {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil // MkdirTemp reports an unusable parent
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), trashSuffix) {
			if err := removeAllContext(ctx, filepath.Join(parent, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAllContext is os.RemoveAll that stops, with ctx's error, when ctx is done: it checks
// ctx before each entry it removes.
func removeAllContext(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return os.RemoveAll(dir)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if err := removeAllContext(ctx, p); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return os.Remove(dir)
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
// It returns where the earlier render was moved ("" when there was none), for the caller to
// remove.
func replaceDir(out, tmp string) (string, error) {
	old := ""
	if _, err := os.Stat(out); err == nil {
		old = tmp + ".old" + trashSuffix
		if err := os.Rename(out, old); err != nil {
			return "", fmt.Errorf("moving the earlier render %s aside: %w", out, err)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		if old != "" {
			_ = os.Rename(old, out)
		}
		return "", fmt.Errorf("moving the render into %s: %w", out, err)
	}
	return old, nil
}

// writeTree writes path → content below dir, in sorted order, stopping with ctx's error when
// ctx is done.
func writeTree(ctx context.Context, dir string, tree map[string][]byte) error {
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
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
