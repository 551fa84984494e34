package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// source is the commit a release is built from.
type source struct {
	// dir is the checkout's root.
	dir string
	// commit is the full commit hash, "-dirty" appended when the work tree has changes (only
	// with -allow-dirty).
	commit string
	// time is the commit's committer time: every timestamp of the release.
	time time.Time
}

// readSource reads HEAD of the checkout at dir and refuses a work tree with uncommitted
// changes (tracked or untracked, ignored files aside) unless allowDirty: a release is the
// build of a commit, and a dirty tree is not one.
func readSource(ctx context.Context, dir string, allowDirty bool) (source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return source{}, err
	}
	if _, err := os.Stat(filepath.Join(abs, "cmd", "bot")); err != nil {
		return source{}, fmt.Errorf("%s is not a fleetbot checkout (no cmd/bot): run make release from the repository root", abs)
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", abs}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), abs, err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	commit, err := git("rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return source{}, fmt.Errorf("reading the commit to release (a release is built from a git checkout): %w", err)
	}
	ct, err := git("show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return source{}, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return source{}, fmt.Errorf("the commit time of %s is %q: %w", commit, ct, err)
	}
	status, err := git("status", "--porcelain", "--untracked-files=normal")
	if err != nil {
		return source{}, err
	}
	if status != "" {
		if !allowDirty {
			lines := strings.Split(status, "\n")
			more := ""
			if len(lines) > 5 {
				more = fmt.Sprintf("\n  ... and %d more", len(lines)-5)
				lines = lines[:5]
			}
			return source{}, fmt.Errorf("the work tree %s has uncommitted changes; a release is built from a commit: commit or stash them first:\n  %s%s",
				abs, strings.Join(lines, "\n  "), more)
		}
		commit += "-dirty"
	}
	return source{dir: abs, commit: commit, time: time.Unix(secs, 0).UTC()}, nil
}
