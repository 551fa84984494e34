package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/go-git/go-git/v5"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// fleet is a loaded, validated and rendered control repo.
type fleet struct {
	repo    *control.Repo
	targets []*fanout.Target
}

// loadFleet loads, validates and renders the control repo at dir, with
// gitURL as the base of the repo URLs in Flux objects ("" for
// fanout.DefaultGitURL). Every validation and render problem comes back
// together as control.Issues; no caller writes anything when err != nil. It
// stops when ctx is done (SIGINT, SIGTERM): between load, revision and render,
// and inside the render between app builds and targets; the error then wraps
// ctx's (errors.Is context.Canceled).
func loadFleet(ctx context.Context, dir, gitURL string) (*fleet, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	repo, err := control.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	repo.Revision = revision(dir)
	targets, err := fanout.NewRenderer(fanout.Options{GitURL: gitURL}).RenderContext(ctx, repo)
	if err != nil {
		return nil, err
	}
	return &fleet{repo: repo, targets: targets}, nil
}

// gitURL is the base URL of target repos rendered into Flux GitRepository
// objects: --git-url, else where the forge the command was given serves them.
// GitHub (and GitHub Enterprise through --github-url or GITHUB_API_URL)
// serves them at its web root; an explicit --forge local:PATH where fleetbot
// dev git-serve serves it. Without --forge (render, validate, plan offline)
// it is GitHub's, so what render prints is what an apply on GitHub writes.
func (a *app) gitURL() string {
	if a.gitURLFlag != "" {
		return a.gitURLFlag
	}
	if strings.HasPrefix(a.forge, "local:") {
		return "http://" + DefaultGitServeListen
	}
	return firstNonEmpty(webRoot(firstNonEmpty(a.github.apiURL, os.Getenv("GITHUB_API_URL"))), fanout.DefaultGitURL)
}

// registerGitURL registers --git-url on a command that renders.
func (a *app) registerGitURL(fs *pflag.FlagSet) {
	fs.StringVar(&a.gitURLFlag, "git-url", "", `base URL of target repos in Flux GitRepository objects, <URL>/<owner>/<repo> (default: from --forge: http://`+DefaultGitServeListen+` for --forge local:PATH, where fleetbot dev git-serve serves it; otherwise GitHub's web root, https://github.com unless --github-url or GITHUB_API_URL names an Enterprise server)`)
}

// revision returns the commit checked out in the control repo's git work
// tree, or "" when dir is not inside one. When files under dir differ from
// that commit (edited, added or deleted and not committed) it is
// "<sha>-dirty", as git describe --dirty says: what is rendered is not that
// commit, and PR bodies must not claim it is. It only reads .git and the work
// tree: rendering itself never uses git.
func revision(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	r, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
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
	sub, err := dirInClone(r, dir)
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

// describeLoadError adds what to do to a load failure that is not a list of
// issues (those speak for themselves).
func describeLoadError(dir string, err error) error {
	var issues control.Issues
	if errors.As(err, &issues) {
		return err
	}
	if errors.Is(err, control.ErrUnreadable) {
		return fmt.Errorf("%w\n    hint: --control must name a control repo directory holding platform.yaml (got %q)", err, dir)
	}
	return err
}
