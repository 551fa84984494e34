package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/go-git/go-git/v5"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// fleet is a loaded, validated and rendered control repo.
type fleet struct {
	repo    *control.Repo
	targets []*fanout.Target
}

// loadFleet loads, validates and renders the control repo at dir. Every
// validation and render problem comes back together as control.Issues; no
// caller writes anything when err != nil.
func loadFleet(dir string) (*fleet, error) {
	repo, err := control.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	repo.Revision = revision(dir)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	if err != nil {
		return nil, err
	}
	return &fleet{repo: repo, targets: targets}, nil
}

// revision returns the commit checked out in the control repo's git work
// tree, or "" when dir is not inside one. It only reads .git: rendering
// itself never uses git.
func revision(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	r, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return ""
	}
	head, err := r.Head()
	if err != nil {
		return ""
	}
	return head.Hash().String()
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
