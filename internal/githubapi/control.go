// Package githubapi holds the webhook service's GitHub REST adapters: the control repo read
// at a commit (webhook.ControlSource) and check runs on its pull requests (webhook.CheckRuns).
// The service itself holds no REST client; serve wires these in.
package githubapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"testing/fstest"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// blobConcurrency bounds the blob reads of one control repo fetch.
const blobConcurrency = 8

// GitHubControl reads the control repo at a commit through the REST API: the
// branch head (one conditional request, free when unchanged), the recursive
// tree (one request) and the blobs under platform.yaml, clusters/,
// workspaces/ and catalog/. Blobs are cached by hash, so after the first
// fetch only the files a push changed are read again. It is safe for
// concurrent use.
type GitHubControl struct {
	api         *gh.Client
	owner, name string

	mu    sync.Mutex
	blobs map[string]cachedBlob
	gen   int
	// decoded are the clusters of earlier loads, so that a commit that changes a few cluster
	// files decodes those only (control.LoadCached).
	decoded *control.Cache
}

type cachedBlob struct {
	data []byte
	gen  int // the fetch that last used it
}

// blobGenerations is how many fetches a blob survives unused: the default
// branch and a few pull request heads alternate.
const blobGenerations = 8

// NewGitHubControl returns the control repo "owner/name" read through api.
func NewGitHubControl(api *gh.Client, fullName string) (*GitHubControl, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("control repo %q: want owner/name", fullName)
	}
	return &GitHubControl{api: api, owner: owner, name: name, blobs: map[string]cachedBlob{}, decoded: control.NewCache(control.DefaultCacheBytes)}, nil
}

// Head returns the commit at the tip of the control repo's default branch.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#get-a-repository
// and https://docs.github.com/rest/git/refs#get-a-reference
func (c *GitHubControl) Head(ctx context.Context) (string, error) {
	r, _, err := c.api.Repositories.Get(ctx, c.owner, c.name)
	if err != nil {
		return "", fmt.Errorf("reading control repo %s/%s: %w", c.owner, c.name, err)
	}
	ref, _, err := c.api.Git.GetRef(ctx, c.owner, c.name, "heads/"+r.GetDefaultBranch())
	if err != nil {
		return "", fmt.Errorf("reading branch %s of control repo %s/%s: %w", r.GetDefaultBranch(), c.owner, c.name, err)
	}
	return ref.GetObject().GetSHA(), nil
}

// Load reads and validates the control repo at commit sha (control.LoadCached: the cluster
// files it decoded for an earlier commit are not decoded again):
// control.Issues when it is invalid, an error wrapping control.ErrUnreadable
// when it cannot be read. The returned Repo's Revision is sha.
func (c *GitHubControl) Load(ctx context.Context, sha string) (*control.Repo, error) {
	files, err := c.Tree(ctx, sha)
	if err != nil {
		return nil, err
	}
	repo, err := control.LoadCached(files, c.decoded)
	if err != nil {
		return nil, err
	}
	repo.Revision = sha
	return repo, nil
}

// Tree returns the files control.Load reads (platform.yaml, clusters/,
// workspaces/, catalog/, rollout/paused) at commit sha, in memory, with their symlinks as
// links (their target as content) and the files inside the repo those links
// point at, so that Load applies the one symlink policy of every reader.
//
// GitHub API docs: https://docs.github.com/rest/git/trees#get-a-tree
// and https://docs.github.com/rest/git/blobs#get-a-blob
func (c *GitHubControl) Tree(ctx context.Context, sha string) (fs.FS, error) {
	if !isSHA(sha) {
		return nil, fmt.Errorf("control repo %s/%s: %q is not a commit SHA", c.owner, c.name, sha)
	}
	tree, _, err := c.api.Git.GetTree(ctx, c.owner, c.name, sha, true)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the tree of %s/%s at %s: %w", control.ErrUnreadable, c.owner, c.name, sha, err)
	}
	if tree.GetTruncated() {
		return nil, fmt.Errorf("%w: the tree of %s/%s at %s is too large for one read", control.ErrUnreadable, c.owner, c.name, sha)
	}
	byPath := make(map[string]*gh.TreeEntry, len(tree.Entries))
	for _, e := range tree.Entries {
		byPath[e.GetPath()] = e
	}
	files := fstest.MapFS{}
	seen := map[string]bool{}
	var want []*gh.TreeEntry
	var total int
	add := func(e *gh.TreeEntry) error {
		p := e.GetPath()
		// Trees (directories) and commits (submodules) carry no content; symlinks (mode
		// 120000) are blobs holding their target, which control.Load resolves with the one
		// symlink policy of every reader.
		if e.GetType() != "blob" || seen[p] {
			return nil
		}
		seen[p] = true
		// The bounds of control.Load, checked before any blob is read.
		total += e.GetSize()
		switch {
		case e.GetSize() > control.MaxFileBytes:
			return fmt.Errorf("%w: %s of %s/%s at %s: %d bytes, more than the %d a file may have",
				control.ErrTooLarge, p, c.owner, c.name, sha, e.GetSize(), control.MaxFileBytes)
		case len(want) >= control.MaxFiles:
			return fmt.Errorf("%w: %s/%s at %s has more than %d files", control.ErrTooLarge, c.owner, c.name, sha, control.MaxFiles)
		case total > control.MaxTotalBytes:
			return fmt.Errorf("%w: %s/%s at %s holds more than %d bytes", control.ErrTooLarge, c.owner, c.name, sha, control.MaxTotalBytes)
		}
		want = append(want, e)
		return nil
	}
	for _, e := range tree.Entries {
		if relevant(e.GetPath()) {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	}
	// A symlink may point anywhere inside the repo: read what its target names, link by link,
	// so that control.Load sees the same files as with a checkout. Targets leaving the repo
	// are never looked up; Load refuses them.
	for done := 0; done < len(want); {
		batch := want[done:]
		done = len(want)
		data, err := c.read(ctx, batch)
		if err != nil {
			return nil, err
		}
		for i, e := range batch {
			f := &fstest.MapFile{Data: data[i], Mode: 0o644}
			if e.GetMode() == "120000" {
				f.Mode = fs.ModeSymlink | 0o777
				for _, p := range linkPaths(e.GetPath(), string(data[i])) {
					if t, ok := byPath[p]; ok {
						if err := add(t); err != nil {
							return nil, err
						}
					}
				}
			}
			files[e.GetPath()] = f
		}
	}
	return files, nil
}

// linkPaths lists the paths inside the repo a symlink at name with target may go through:
// its target and every directory on the way (any of which may be a link too); none when the
// target is absolute or leaves the repo.
func linkPaths(name, target string) []string {
	if target == "" || strings.HasPrefix(target, "/") {
		return nil
	}
	p := path.Join(path.Dir(name), target)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return nil
	}
	var out []string
	for {
		out = append(out, p)
		d := path.Dir(p)
		if d == "." {
			return out
		}
		p = d
	}
}

// PullRequest returns the base commit and the author of control-repo pull
// request number, for a check re-run that named only the pull request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#get-a-pull-request
func (c *GitHubControl) PullRequest(ctx context.Context, number int) (base, author string, err error) {
	p, _, err := c.api.PullRequests.Get(ctx, c.owner, c.name, number)
	if err != nil {
		return "", "", fmt.Errorf("reading pull request %s/%s#%d: %w", c.owner, c.name, number, err)
	}
	return p.GetBase().GetSHA(), p.GetUser().GetLogin(), nil
}

// relevant reports whether p is read by control.Load.
func relevant(p string) bool {
	top, _, _ := strings.Cut(p, "/")
	switch top {
	case "clusters", "workspaces", "catalog":
		return true
	case "rollout":
		// The rollout records: rollout/paused (fleetbot rollout pause), rollout/approvals/,
		// rollout/skips/ and rollout/rollback.yaml (fleetbot rollout approve|skip|rollback).
		return true
	}
	// The control repo's CODEOWNERS says who may approve a wave.
	return p == "platform.yaml" || p == "platform.yml" || slices.Contains(control.CodeownersPaths, p)
}

// isSHA reports whether s is a full lowercase hex commit SHA.
func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// read returns the content of entries, from the cache or the API.
func (c *GitHubControl) read(ctx context.Context, entries []*gh.TreeEntry) ([][]byte, error) {
	c.mu.Lock()
	c.gen++
	gen := c.gen
	out := make([][]byte, len(entries))
	var missing []int
	for i, e := range entries {
		if b, ok := c.blobs[e.GetSHA()]; ok {
			out[i] = b.data
			c.blobs[e.GetSHA()] = cachedBlob{data: b.data, gen: gen}
		} else {
			missing = append(missing, i)
		}
	}
	c.mu.Unlock()

	if err := readMissing(ctx, entries, missing, out, c.blob); err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range missing {
		c.blobs[entries[i].GetSHA()] = cachedBlob{data: out[i], gen: gen}
	}
	for sha, b := range c.blobs {
		if gen-b.gen >= blobGenerations {
			delete(c.blobs, sha)
		}
	}
	return out, nil
}

// readMissing reads the entries at the indexes missing into out, blobConcurrency at a time
// (the control repo's and the tenant repos' reads share it).
func readMissing(ctx context.Context, entries []*gh.TreeEntry, missing []int, out [][]byte,
	read func(context.Context, *gh.TreeEntry) ([]byte, error)) error {
	errs := make([]error, len(missing))
	sem := make(chan struct{}, blobConcurrency)
	var wg sync.WaitGroup
	for k, i := range missing {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[k] = read(ctx, entries[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *GitHubControl) blob(ctx context.Context, e *gh.TreeEntry) ([]byte, error) {
	b, _, err := c.api.Git.GetBlob(ctx, c.owner, c.name, e.GetSHA())
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s of %s/%s: %w", control.ErrUnreadable, e.GetPath(), c.owner, c.name, err)
	}
	if b.GetEncoding() != "base64" {
		return []byte(b.GetContent()), nil
	}
	data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(b.GetContent(), "\n", ""))
	if err != nil {
		return nil, fmt.Errorf("%w: decoding %s of %s/%s: %w", control.ErrUnreadable, e.GetPath(), c.owner, c.name, err)
	}
	return data, nil
}
