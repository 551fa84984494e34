package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// Target is the desired state of one target repo (fanout.Target): its managed files and
// scaffolds, what render writes.
type Target = fanout.Target

// Fleet is a loaded, validated and rendered control repo.
type Fleet struct {
	Repo    *control.Repo
	Targets []*fanout.Target
}

// Owner is the platform owner: the org (or user) owning every target repo.
func (f *Fleet) Owner() string { return f.Repo.Platform.Spec.Owner }

// ClusterRepos lists the "owner/name" of f's cluster repos (not those being removed).
func (f *Fleet) ClusterRepos() []string {
	var out []string
	for _, t := range f.Targets {
		if t.Kind == fanout.KindCluster && !t.Removed {
			out = append(out, t.FullName())
		}
	}
	return out
}

// Load loads, validates and renders the control repo at dir with c's renderer. Every
// validation and render problem comes back together as control.Issues; no caller writes
// anything when err != nil. It stops when ctx is done (SIGINT, SIGTERM): between load,
// revision and render, and inside the render between app builds and targets; the error then
// wraps ctx's (errors.Is context.Canceled).
func (c Config) Load(ctx context.Context, dir string) (*Fleet, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	r := c.Renderer()
	repo, err := LoadDir(ctx, r, dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	repo.Revision = Revision(dir)
	targets, err := r.RenderContext(ctx, repo)
	if err != nil {
		return nil, err
	}
	return &Fleet{Repo: repo, Targets: targets}, nil
}

// LoadDir is control.LoadDir with r building the catalog's apps (Renderer.Prebuild) beside
// the rest of the load: on a machine with a second CPU, the kustomize builds of a cold render
// overlap decoding the cluster files. It returns once both are done; a failed load stops the
// builds first (they end within one build).
func LoadDir(ctx context.Context, r *fanout.Renderer, dir string) (*control.Repo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var builds sync.WaitGroup
	repo, err := control.LoadDirWith(dir, control.Options{Catalog: func(apps []*control.App) {
		builds.Go(func() { r.Prebuild(ctx, apps) })
	}})
	if err != nil {
		cancel()
	}
	builds.Wait()
	return repo, err
}

// DescribeLoadError adds what to do to a load failure that is not a list of issues (those
// speak for themselves).
func DescribeLoadError(dir string, err error) error {
	var issues control.Issues
	if errors.As(err, &issues) {
		return err
	}
	if errors.Is(err, control.ErrUnreadable) {
		return fmt.Errorf("%w\n    hint: --control must name a control repo directory holding platform.yaml (got %q)", err, dir)
	}
	return err
}

// Revision returns the commit checked out in the control repo's git work tree, or "" when
// dir is not inside one. When files under dir differ from that commit (edited, added or
// deleted and not committed) it is "<sha>-dirty", as git describe --dirty says: what is
// rendered is not that commit, and PR bodies must not claim it is. It only reads .git and the
// work tree: rendering itself never uses git.
func Revision(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	r, err := OpenClone(abs)
	if err != nil {
		return ""
	}
	head, err := r.Head()
	if err != nil {
		return ""
	}
	sha := head.Hash().String()
	if dirty(r, abs) {
		sha += "-dirty"
	}
	return sha
}

// dirty reports whether any file under dir differs from the checked-out commit (ignored
// files aside). An unreadable status counts as dirty: claiming a commit is worse.
func dirty(r *git.Repository, dir string) bool {
	sub, err := DirInClone(r, dir)
	if err != nil {
		return true
	}
	wt, err := r.Worktree()
	if err != nil {
		return false // bare: nothing to edit
	}
	st, err := wt.Status()
	if err != nil {
		return true
	}
	prefix := sub + "/"
	for path, s := range st {
		if s.Worktree == git.Unmodified && s.Staging == git.Unmodified {
			continue
		}
		if sub == "." || strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// DirInClone is dir relative to the root of the git work tree holding it ("." at the root).
func DirInClone(repo *git.Repository, dir string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return ".", nil // a bare clone: its tree is the control repo
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return "", fmt.Errorf("locating the git work tree of %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("--control %s: %w", dir, err)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("--control %s is outside its git work tree %s", dir, root)
	}
	return filepath.ToSlash(rel), nil
}

// OwnerAt is the platform owner (the org) of the control repo in fsys, read without
// rendering; false when it does not load (a review reports that itself).
func OwnerAt(fsys fs.FS) (string, bool) {
	repo, err := control.Load(fsys)
	if err != nil {
		return "", false
	}
	return repo.Platform.Spec.Owner, true
}
