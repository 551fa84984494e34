package githubapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
)

// Bounds of a tenant check's read of a workspace or cluster repo through the API. A check
// workspace run on a checkout reads up to the control repo's bounds (control.MaxFiles,
// control.MaxTotalBytes); through the API every file is a request on the installation's rate
// limit, which the fan-out shares, so serve reads fewer: a repo beyond them fails its check
// with what to do, and nothing is read.
const (
	// MaxTenantFiles is the most files a tenant check reads (blobs; directories, symlinks and
	// submodules are not read).
	MaxTenantFiles = 1000
	// MaxTenantBytes is the most bytes of files a tenant check reads; one file may hold
	// control.MaxFileBytes.
	MaxTenantBytes = 16 << 20
	// tenantCacheBytes bounds the blobs kept between checks (by blob hash, so a pull request's
	// next push reads only what it changed).
	tenantCacheBytes = 64 << 20
)

// ErrTenantRepo marks a workspace or cluster repo commit a tenant check refuses to read: too
// large for the bounds above, or a path that is not a plain path inside the repo.
var ErrTenantRepo = errors.New("tenant repo not checked")

// ClientFunc returns the REST client of the App's installation on owner, read-only or able
// to write.
type ClientFunc func(ctx context.Context, owner string, write bool) (*gh.Client, error)

// TenantRepos implements webhook.TenantChecks: it reads workspace and cluster repos at a
// commit through the Git Data API (the recursive tree, one request, then each blob not read
// before) and writes the tenant check runs on them, each repo through the installation on its
// owner. It is safe for concurrent use.
type TenantRepos struct {
	client    ClientFunc
	checkName string
	now       func() time.Time

	mu     sync.Mutex
	blobs  map[string][]byte
	order  []string // blob hashes, oldest first
	cached int
}

// NewTenantRepos returns the tenant check runs named checkName (default
// checkrun.DefaultTenantCheckName), read and written through client.
func NewTenantRepos(client ClientFunc, checkName string) *TenantRepos {
	if checkName == "" {
		checkName = checkrun.DefaultTenantCheckName
	}
	return &TenantRepos{client: client, checkName: checkName, now: time.Now, blobs: map[string][]byte{}}
}

// splitRepo splits "owner/name".
func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repo %q: want owner/name", repo)
	}
	return owner, name, nil
}

// Files returns the regular files of repo at commit sha, by path, as a checkout holds them
// for check workspace: symlinks and submodules are left out (a checkout's symlinks are not
// followed either). Every path is checked to be a plain relative path inside the repo, and the
// bounds (MaxTenantFiles, control.MaxFileBytes a file, MaxTenantBytes) before any blob is read.
// A file whose blob hash is a key of rendered (what fleetbot renders into the repo) is taken
// from there, as is one read for an earlier check: a fleetbot pull request costs the tree and
// the files of the repo's admins only.
//
// GitHub API docs: https://docs.github.com/rest/git/trees#get-a-tree
// and https://docs.github.com/rest/git/blobs#get-a-blob
func (t *TenantRepos) Files(ctx context.Context, repo, sha string, rendered map[string][]byte) (map[string][]byte, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	if !isSHA(sha) {
		return nil, fmt.Errorf("%s: %q is not a commit SHA", repo, sha)
	}
	api, err := t.client(ctx, owner, false)
	if err != nil {
		return nil, err
	}
	tree, _, err := api.Git.GetTree(ctx, owner, name, sha, true)
	if err != nil {
		return nil, fmt.Errorf("reading the tree of %s at %s: %w", repo, sha, err)
	}
	if tree.GetTruncated() {
		return nil, fmt.Errorf("%w: the tree of %s at %s is too large for one read (GitHub truncated it); %s", ErrTenantRepo, repo, sha, tenantHint)
	}
	want, err := tenantBlobs(repo, sha, tree.Entries)
	if err != nil {
		return nil, err
	}
	data, err := t.read(ctx, api, owner, name, want, rendered)
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte, len(want))
	for i, e := range want {
		files[e.GetPath()] = data[i]
	}
	return files, nil
}

// tenantHint says what to do about a repo the tenant check refuses to read.
const tenantHint = "keep the repo to what Flux applies, or a platform admin merges the pull request"

// tenantBlobs picks the entries of a tree a tenant check reads and checks their paths and
// sizes against the bounds.
func tenantBlobs(repo, sha string, entries []*gh.TreeEntry) ([]*gh.TreeEntry, error) {
	var want []*gh.TreeEntry
	total := 0
	for _, e := range entries {
		p := e.GetPath()
		if !fs.ValidPath(p) || p == "." || strings.Contains(p, "\\") {
			return nil, fmt.Errorf("%w: %s at %s has an entry %q that is not a plain path inside the repo", ErrTenantRepo, repo, sha, p)
		}
		for _, elem := range strings.Split(p, "/") {
			if strings.EqualFold(elem, ".git") {
				return nil, fmt.Errorf("%w: %s at %s has an entry %q inside a .git directory", ErrTenantRepo, repo, sha, p)
			}
		}
		if e.GetType() != "blob" || (e.GetMode() != "100644" && e.GetMode() != "100755") {
			continue // directories, symlinks (120000), submodules (160000)
		}
		total += e.GetSize()
		switch {
		case e.GetSize() < 0:
			return nil, fmt.Errorf("%w: %s of %s at %s: GitHub answered a size of %d bytes", ErrTenantRepo, p, repo, sha, e.GetSize())
		case e.GetSize() > control.MaxFileBytes:
			return nil, fmt.Errorf("%w: %s of %s at %s: %d bytes, more than the %d a file may have; %s",
				ErrTenantRepo, p, repo, sha, e.GetSize(), control.MaxFileBytes, tenantHint)
		case len(want) == MaxTenantFiles:
			return nil, fmt.Errorf("%w: %s at %s has more than %d files, the most fleetbot serve reads through the GitHub API for a tenant check; %s",
				ErrTenantRepo, repo, sha, MaxTenantFiles, tenantHint)
		case total > MaxTenantBytes:
			return nil, fmt.Errorf("%w: %s at %s holds more than %d bytes of files, the most fleetbot serve reads through the GitHub API for a tenant check; %s",
				ErrTenantRepo, repo, sha, MaxTenantBytes, tenantHint)
		}
		want = append(want, e)
	}
	return want, nil
}

// read returns the content of entries, from rendered, the cache or the API, blobConcurrency at
// a time.
func (t *TenantRepos) read(ctx context.Context, api *gh.Client, owner, name string, entries []*gh.TreeEntry, rendered map[string][]byte) ([][]byte, error) {
	out := make([][]byte, len(entries))
	var missing []int
	t.mu.Lock()
	for i, e := range entries {
		if b, ok := rendered[e.GetSHA()]; ok && len(b) == e.GetSize() {
			out[i] = b
		} else if b, ok := t.blobs[e.GetSHA()]; ok {
			out[i] = b
		} else {
			missing = append(missing, i)
		}
	}
	t.mu.Unlock()
	read := func(ctx context.Context, e *gh.TreeEntry) ([]byte, error) { return readBlob(ctx, api, owner, name, e) }
	if err := readMissing(ctx, entries, missing, out, read); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range missing {
		t.keep(entries[i].GetSHA(), out[i])
	}
	return out, nil
}

// readBlob reads one blob and checks it holds the size the tree said.
func readBlob(ctx context.Context, api *gh.Client, owner, name string, e *gh.TreeEntry) ([]byte, error) {
	blob, _, err := api.Git.GetBlob(ctx, owner, name, e.GetSHA())
	if err != nil {
		return nil, fmt.Errorf("reading %s of %s/%s: %w", e.GetPath(), owner, name, err)
	}
	b := []byte(blob.GetContent())
	if blob.GetEncoding() == "base64" {
		if b, err = base64.StdEncoding.DecodeString(strings.ReplaceAll(blob.GetContent(), "\n", "")); err != nil {
			return nil, fmt.Errorf("decoding %s of %s/%s: %w", e.GetPath(), owner, name, err)
		}
	}
	if len(b) != e.GetSize() {
		return nil, fmt.Errorf("reading %s of %s/%s: GitHub answered %d bytes for a blob of %d", e.GetPath(), owner, name, len(b), e.GetSize())
	}
	return b, nil
}

// keep caches a blob, forgetting the oldest beyond tenantCacheBytes; call with t.mu held.
func (t *TenantRepos) keep(sha string, data []byte) {
	if _, ok := t.blobs[sha]; ok || len(data) > tenantCacheBytes {
		return
	}
	t.blobs[sha] = data
	t.order = append(t.order, sha)
	t.cached += len(data)
	for t.cached > tenantCacheBytes && len(t.order) > 0 {
		old := t.order[0]
		t.order = t.order[1:]
		t.cached -= len(t.blobs[old])
		delete(t.blobs, old)
	}
}

// Start creates an in-progress tenant check run on commit sha of repo.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#create-a-check-run
func (t *TenantRepos) Start(ctx context.Context, repo, sha string) (int64, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return 0, err
	}
	api, err := t.client(ctx, owner, true)
	if err != nil {
		return 0, err
	}
	cr, _, err := api.Checks.CreateCheckRun(ctx, owner, name, gh.CreateCheckRunOptions{
		Name: t.checkName, HeadSHA: sha, Status: gh.String("in_progress"), StartedAt: &gh.Timestamp{Time: t.now()},
	})
	if err != nil {
		return 0, fmt.Errorf("creating check run %q on %s@%s: %w%s", t.checkName, repo, sha, err, permissionHint(err, owner))
	}
	return cr.GetID(), nil
}

// permissionHint says what to do when GitHub refused a check run to the App.
func permissionHint(err error, owner string) string {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden {
		return fmt.Sprintf(" (the App's installation on %s needs the checks: write permission that app.yml lists: accept it in the installation's settings)", owner)
	}
	return ""
}

// Finish completes tenant check run id of repo with r: its annotations (at most
// checkrun.MaxTenantAnnotations) go checkrun.MaxAnnotations per request, GitHub appending each
// request's to the check run's; the last request completes it, so that a check run whose
// annotations are not all written is never complete.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#update-a-check-run
func (t *TenantRepos) Finish(ctx context.Context, repo string, id int64, r checkrun.Result) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return err
	}
	api, err := t.client(ctx, owner, true)
	if err != nil {
		return err
	}
	anns := r.Annotations[:min(len(r.Annotations), checkrun.MaxTenantAnnotations)]
	for {
		batch := anns[:min(len(anns), checkrun.MaxAnnotations)]
		anns = anns[len(batch):]
		opts := gh.UpdateCheckRunOptions{Name: t.checkName, Output: checkOutput(r, batch)}
		if len(anns) == 0 {
			opts.Status, opts.Conclusion, opts.CompletedAt = gh.String("completed"), gh.String(r.Conclusion), &gh.Timestamp{Time: t.now()}
		}
		if _, _, err := api.Checks.UpdateCheckRun(ctx, owner, name, id, opts); err != nil {
			return fmt.Errorf("completing check run %d on %s: %w%s", id, repo, err, permissionHint(err, owner))
		}
		if len(anns) == 0 {
			return nil
		}
	}
}
