package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing/fstest"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ErrControlUnreadable means the control repo could not be fetched (missing repo or ref, no
// access, network); it is kept apart from a control repo that is fetched but invalid.
var ErrControlUnreadable = errors.New("control repo unreadable")

// FetchControl fetches the tree of owner/repo at ref (a branch or tag; "" for the default
// branch) with a shallow, single-branch go-git clone into memory (no history, no work tree on
// disk) over HTTPS, authenticated as x-access-token with token, and returns it as an fs.FS
// for control.Load together with the commit SHA. gitURL is the web root ("" for
// https://github.com/; for GitHub Enterprise https://HOST/).
func FetchControl(ctx context.Context, gitURL, token, owner, repo, ref string) (fstest.MapFS, string, error) {
	if gitURL == "" {
		gitURL = "https://github.com/"
	}
	u, err := url.Parse(strings.TrimSuffix(gitURL, "/") + "/" + owner + "/" + repo + ".git")
	if err != nil || u.User != nil {
		return nil, "", fmt.Errorf("%w: git URL %q: want https://HOST/ without credentials", ErrControlUnreadable, RedactURL(gitURL))
	}
	opts := &git.CloneOptions{URL: u.String(), Depth: 1, SingleBranch: true, Tags: git.NoTags}
	if token != "" {
		opts.Auth = &githttp.BasicAuth{Username: "x-access-token", Password: token}
	}
	if ref != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(ref)
	}
	r, err := git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	if err != nil && ref != "" && errors.Is(err, plumbing.ErrReferenceNotFound) {
		opts.ReferenceName = plumbing.NewTagReferenceName(ref)
		r, err = git.CloneContext(ctx, memory.NewStorage(), nil, opts)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: cloning %s/%s@%s: %v", ErrControlUnreadable, owner, repo, ref, redactErr(err, token))
	}
	head, err := r.Head()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s/%s: %v", ErrControlUnreadable, owner, repo, err)
	}
	c, err := r.CommitObject(head.Hash())
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s/%s: reading commit %s: %v", ErrControlUnreadable, owner, repo, head.Hash(), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s/%s: reading tree: %v", ErrControlUnreadable, owner, repo, err)
	}
	fsys := fstest.MapFS{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !f.Mode.IsFile() {
			return nil // symlinks and submodules are not control repo content
		}
		rd, err := f.Reader()
		if err != nil {
			return err
		}
		defer rd.Close()
		b, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		fsys[f.Name] = &fstest.MapFile{Data: b, Mode: 0o644}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s/%s: reading files: %v", ErrControlUnreadable, owner, repo, err)
	}
	return fsys, head.Hash().String(), nil
}

// redactErr removes the token from an error message, in case a transport quotes it.
func redactErr(err error, token string) string {
	s := err.Error()
	if token != "" {
		s = strings.ReplaceAll(s, token, "REDACTED")
	}
	return s
}
