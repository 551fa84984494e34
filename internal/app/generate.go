package app

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// GenerateOptions size a synthetic control repo (fleetbot dev generate); zero values pick
// defaults.
type GenerateOptions = fleetgen.Options

// GenerateControlRepo writes a synthetic control repo of opts' size into dir, which must be
// empty or missing, and returns how many files it wrote: the same options and seed always give
// the same files. The files are written into a directory beside dir and moved into place at the
// end, so dir is never half-written; when ctx is done (SIGINT, SIGTERM) it stops before the next
// file, removes what it wrote and leaves dir as it was.
func GenerateControlRepo(ctx context.Context, dir string, opts GenerateOptions) (int, error) {
	files := fleetgen.Generate(opts)
	clean := filepath.Clean(dir)
	parent := filepath.Dir(clean)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, fmt.Errorf("creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(clean)+".generate-*")
	if err != nil {
		return 0, fmt.Errorf("creating a directory beside %s: %w", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("generate interrupted (%w): %s is unchanged", context.Cause(ctx), dir)
		}
		file := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return 0, fmt.Errorf("writing generated control repo: %w", err)
		}
		if err := os.WriteFile(file, files[p].Data, 0o644); err != nil {
			return 0, fmt.Errorf("writing generated control repo: %w", err)
		}
	}
	_ = os.Remove(clean) // an empty --out (the caller refuses one that is not): the rename replaces it
	if err := os.Rename(tmp, clean); err != nil {
		return 0, fmt.Errorf("moving the generated control repo into %s: %w", dir, err)
	}
	done = true
	return len(files), nil
}
