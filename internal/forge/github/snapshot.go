package github

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// cacheVersion is bumped whenever repoState changes meaning; older files are ignored.
const cacheVersion = 1

// repoState is what the forge remembers of one repo between calls and, with
// ForgeOptions.CacheDir, between runs: enough to answer Snapshot from one conditional request
// when no branch moved.
type repoState struct {
	Version int `json:"version"`
	// DefaultBranch and BotBranch are the branches the state was read for.
	DefaultBranch string `json:"defaultBranch"`
	BotBranch     string `json:"botBranch"`
	// RefsETag validates Branches: the ETag of GET git/matching-refs/heads/.
	RefsETag string            `json:"refsETag,omitempty"`
	Branches map[string]string `json:"branches,omitempty"`
	// Empty is true for a repo without any branch.
	Empty bool `json:"empty,omitempty"`
	// Base is the default branch head and Files its flat tree listing.
	Base  *pr.Commit      `json:"base,omitempty"`
	Files gittree.Listing `json:"files,omitempty"`
	// Bot is the bot branch head.
	Bot *pr.Commit `json:"bot,omitempty"`
	// PR is the latest pull request from the bot branch; PRRead says it was looked up.
	PR     *pr.PullRequest `json:"pr,omitempty"`
	PRRead bool            `json:"prRead,omitempty"`
	// Placeholder is the Contents API commit that made an empty repo's default branch, to be
	// replaced by the bootstrap commit.
	Placeholder string `json:"placeholder,omitempty"`
	// NodeID is the repository's GraphQL node id, which updateRefs names it by.
	NodeID string `json:"nodeId,omitempty"`
	// RepoDefault is the default branch GitHub gave a repo fleetbot created.
	RepoDefault string `json:"repoDefault,omitempty"`
	// Access is the last observed (or written) access, at AccessAt (Unix seconds).
	Access   *policy.Access `json:"access,omitempty"`
	AccessAt int64          `json:"accessAt,omitempty"`
	// Codeowners is the last CODEOWNERS errors check (see codeowners.go).
	Codeowners *codeownersCheck `json:"codeowners,omitempty"`
}

// state returns the entry's state, creating an empty one.
func (e *repoEntry) state() *repoState {
	if e.st == nil {
		e.st = &repoState{Version: cacheVersion}
	}
	return e.st
}

func (f *Forge) cacheFile(owner, repo string) string {
	if f.opts.CacheDir == "" {
		return ""
	}
	return filepath.Join(f.opts.CacheDir, strings.ToLower(owner), strings.ToLower(repo)+".json")
}

// loadState reads a repo's state from the disk cache; any problem means no cache.
func (f *Forge) loadState(owner, repo string) *repoState {
	name := f.cacheFile(owner, repo)
	if name == "" {
		return nil
	}
	if err := checkOwned(name, false); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("not trusting a snapshot cache file; reading the repo from GitHub", "err", err)
		}
		return nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	var st repoState
	if err := json.Unmarshal(b, &st); err != nil {
		f.log.Warn("ignoring a corrupt snapshot cache file; reading the repo from GitHub (the file is only a cache)", "file", name, "err", err)
		return nil
	}
	if st.Version != cacheVersion {
		// After an upgrade every file is of the old version: one line per repo only when debugging.
		f.log.Debug("ignoring a snapshot cache file of another version", "file", name, "version", st.Version, "want", cacheVersion)
		return nil
	}
	return &st
}

// saveState writes a repo's state to the disk cache (atomically); failures are logged, never
// fatal: the cache only saves requests.
func (f *Forge) saveState(owner, repo string, st *repoState) {
	name := f.cacheFile(owner, repo)
	if name == "" || st == nil {
		return
	}
	b, err := json.Marshal(st)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(name), 0o700)
	}
	if err == nil {
		var tmp *os.File
		tmp, err = os.CreateTemp(filepath.Dir(name), ".tmp-*")
		if err == nil {
			_, err = tmp.Write(b)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Rename(tmp.Name(), name)
			}
			if err != nil {
				_ = os.Remove(tmp.Name())
			}
		}
	}
	if err != nil {
		f.log.Warn("writing snapshot cache", "file", name, "err", err)
	}
}

// Snapshot implements pr.Forge. The one request of an unchanged repo is a conditional
// GET git/matching-refs/heads/ (every branch, one ETag): a 304 means neither the default nor
// the bot branch moved, and the cached listing, bot commit and pull request stand. When a
// branch moved, only what moved is read again: the recursive tree of the default branch, the
// bot commit, and the latest pull request from the bot branch (merged, closed or open).
func (f *Forge) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	full := owner + "/" + repo
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.st
	if st != nil && (st.DefaultBranch != defaultBranch || st.BotBranch != botBranch) {
		st = nil // read for other branches: start over
	}
	h := f.hintFor(e, defaultBranch, botBranch)
	if h != nil && h.unchanged(st) {
		// The scan just read both heads and the newest pull request: nothing to ask.
		e.fresh = true
		if !samePR(st.PR, h.pr) {
			st.PR = h.pr
			f.saveState(owner, repo, st)
		}
		h.seen = markOf(st) // the state now holds what the hint saw
		s := st.snapshot()
		h.decorate(s)
		return s, nil
	}
	etag := ""
	if st != nil {
		etag = st.RefsETag
	}
	branches, newTag, notModified, err := f.branches(ctx, owner, repo, etag)
	switch {
	case IsNotFound(err):
		e.st, e.fresh = nil, true
		return &pr.Snapshot{}, nil
	case errors.Is(err, errEmptyRepo):
		next := &repoState{Version: cacheVersion, DefaultBranch: defaultBranch, BotBranch: botBranch, Empty: true, PRRead: true}
		if st != nil {
			next.RepoDefault, next.Access, next.AccessAt = st.RepoDefault, st.Access, st.AccessAt
			next.Codeowners, next.NodeID = st.Codeowners, st.NodeID
		}
		e.st, e.fresh = next, true
		return &pr.Snapshot{Exists: true, Empty: true}, nil
	case err != nil:
		return nil, errf(err, "listing branches of", full)
	}
	if notModified {
		e.fresh = false
		s := st.snapshot()
		h.decorate(s)
		return s, nil
	}
	next := &repoState{Version: cacheVersion, DefaultBranch: defaultBranch, BotBranch: botBranch, RefsETag: newTag, Branches: branches}
	if st != nil {
		next.RepoDefault, next.Access, next.AccessAt, next.Placeholder = st.RepoDefault, st.Access, st.AccessAt, st.Placeholder
		next.NodeID = st.NodeID
		next.Codeowners = st.Codeowners // keyed by blob and access: still valid
	}
	moved := st == nil || !st.PRRead
	if sha := branches[defaultBranch]; sha != "" {
		if st != nil && st.Base != nil && st.Base.SHA == sha && st.Files != nil {
			next.Base, next.Files = st.Base, st.Files
		} else {
			moved = true
			next.Base, next.Files, err = f.readTree(ctx, owner, repo, sha)
			if err != nil {
				return nil, err
			}
		}
	} else if st != nil && st.Base != nil {
		moved = true
	}
	if sha := branches[botBranch]; sha != "" {
		if st != nil && st.Bot != nil && st.Bot.SHA == sha {
			next.Bot = st.Bot
		} else {
			moved = true
			next.Bot, err = f.readCommit(ctx, owner, repo, sha)
			if err != nil {
				return nil, err
			}
		}
	} else if st != nil && st.Bot != nil {
		moved = true
	}
	if moved {
		next.PR, err = f.latestPR(ctx, owner, repo, defaultBranch, botBranch)
		if err != nil {
			return nil, err
		}
		next.PRRead, e.fresh = true, true
	} else {
		next.PR, next.PRRead, e.fresh = st.PR, true, false
	}
	e.st = next
	f.saveState(owner, repo, next)
	s := next.snapshot()
	h.decorate(s)
	return s, nil
}

// samePR reports whether two observations of a pull request agree on everything Decide reads.
func samePR(a, b *pr.PullRequest) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (st *repoState) snapshot() *pr.Snapshot {
	s := &pr.Snapshot{Exists: true, Empty: st.Empty || len(st.Branches) == 0}
	if st.Base != nil {
		c := *st.Base
		s.Base, s.Files = &c, st.Files.Clone()
	}
	if st.Bot != nil {
		c := *st.Bot
		s.Bot = &c
	}
	if st.PR != nil {
		p := *st.PR
		s.PR = &p
	}
	return s
}

var errEmptyRepo = errors.New("git repository is empty")

// branches lists every branch head with one conditional request; notModified is true when
// GitHub answered 304 to etag.
//
// GitHub API docs: https://docs.github.com/rest/git/refs#list-matching-references
func (f *Forge) branches(ctx context.Context, owner, repo, etag string) (map[string]string, string, bool, error) {
	out := map[string]string{}
	newTag := ""
	err := EachPage(func(o gh.ListOptions) ([]*gh.Reference, *gh.Response, error) {
		u := fmt.Sprintf("repos/%s/%s/git/matching-refs/heads/?per_page=%d", owner, repo, o.PerPage)
		if o.Page != 0 {
			u += fmt.Sprintf("&page=%d", o.Page)
		}
		req, err := f.api.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, nil, err
		}
		if o.Page == 0 && etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		var refs []*gh.Reference
		resp, err := f.api.Do(ctx, req, &refs)
		switch {
		case statusOf(resp) == http.StatusNotModified:
			return nil, nil, errNotModified
		case statusOf(resp) == http.StatusConflict:
			return nil, nil, errEmptyRepo
		case err != nil:
			return nil, nil, err
		}
		if o.Page == 0 {
			newTag = resp.Header.Get("ETag")
		}
		if resp.NextPage != 0 {
			newTag = "" // a multi-page answer cannot be validated with one ETag
		}
		return refs, resp, nil
	}, func(refs []*gh.Reference) (bool, error) {
		for _, r := range refs {
			if r.GetObject().GetType() != "" && r.GetObject().GetType() != "commit" {
				continue
			}
			out[strings.TrimPrefix(r.GetRef(), "refs/heads/")] = r.GetObject().GetSHA()
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errNotModified):
		return nil, etag, true, nil
	case err != nil:
		return nil, "", false, err
	}
	return out, newTag, false, nil
}

// errNotModified is GitHub answering 304 to the first page's If-None-Match.
var errNotModified = errors.New("not modified")

// readTree reads the flat listing of a commit's tree with one recursive request (a truncated
// answer, for trees over GitHub's 100,000 entries, falls back to one request per directory).
//
// GitHub API docs: https://docs.github.com/rest/git/trees#get-a-tree
func (f *Forge) readTree(ctx context.Context, owner, repo, commitSHA string) (*pr.Commit, gittree.Listing, error) {
	full := owner + "/" + repo
	t, _, err := f.api.Git.GetTree(ctx, owner, repo, commitSHA, true)
	if err != nil {
		return nil, nil, errf(err, "reading tree "+commitSHA+" of", full)
	}
	l := gittree.Listing{}
	if !t.GetTruncated() {
		addEntries(l, "", t.Entries)
	} else if err := f.walkTree(ctx, owner, repo, "", t.GetSHA(), l); err != nil {
		return nil, nil, err
	}
	return &pr.Commit{SHA: commitSHA, Tree: t.GetSHA()}, l, nil
}

func (f *Forge) walkTree(ctx context.Context, owner, repo, prefix, sha string, l gittree.Listing) error {
	t, _, err := f.api.Git.GetTree(ctx, owner, repo, sha, false)
	if err != nil {
		return errf(err, "reading tree "+sha+" of", owner+"/"+repo)
	}
	addEntries(l, prefix, t.Entries)
	for _, te := range t.Entries {
		if te.GetType() == "tree" {
			if err := f.walkTree(ctx, owner, repo, prefix+te.GetPath()+"/", te.GetSHA(), l); err != nil {
				return err
			}
		}
	}
	return nil
}

func addEntries(l gittree.Listing, prefix string, entries []*gh.TreeEntry) {
	for _, te := range entries {
		if te.GetType() == "tree" {
			continue
		}
		var mode uint32
		_, _ = fmt.Sscanf(te.GetMode(), "%o", &mode)
		l[prefix+te.GetPath()] = gittree.Entry{Mode: gittree.Mode(mode), Hash: te.GetSHA()}
	}
}

// readCommit reads one commit: its tree, parents and message (pr tells fleetbot's own commits
// by their trailer, not by who GitHub says committed them).
//
// GitHub API docs: https://docs.github.com/rest/git/commits#get-a-commit-object
func (f *Forge) readCommit(ctx context.Context, owner, repo, sha string) (*pr.Commit, error) {
	c, _, err := f.api.Git.GetCommit(ctx, owner, repo, sha)
	if err != nil {
		return nil, errf(err, "reading commit "+sha+" of", owner+"/"+repo)
	}
	out := &pr.Commit{SHA: c.GetSHA(), Tree: c.GetTree().GetSHA(), Message: c.GetMessage()}
	for _, p := range c.Parents {
		out.Parents = append(out.Parents, p.GetSHA())
	}
	return out, nil
}

// selfLogin returns ForgeOptions.Login, else the App's bot login (GET /app, with the App's
// JWT), else, with a token, the token's user (GET /user) — looked up once. An installation
// token never asks GET /user: GitHub answers it 403 "Resource not accessible by integration";
// an Actions token (an installation token fleetbot cannot tell from a personal one) gets that
// answer once, without retry, and the login stays unknown.
func (f *Forge) selfLogin(ctx context.Context) string {
	f.loginOnce.Do(func() {
		if f.login != "" {
			return
		}
		if f.c.app != nil {
			l, err := f.c.BotLogin(ctx)
			if err != nil {
				f.log.Warn("could not read the GitHub App's bot login", "err", err)
			}
			f.login = l
			return
		}
		u, _, err := f.api.Users.Get(ctx, "")
		if err != nil {
			f.log.Debug("could not read the token's user (an installation token cannot); fleetbot's own login stays unknown", "err", err)
			return
		}
		f.login = u.GetLogin()
	})
	return f.login
}

// latestPR returns the most recent pull request from botBranch into defaultBranch, in any
// state, with one request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#list-pull-requests
func (f *Forge) latestPR(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.PullRequest, error) {
	ps, _, err := f.api.PullRequests.List(ctx, owner, repo, &gh.PullRequestListOptions{
		State: "all", Head: owner + ":" + botBranch, Base: defaultBranch, Sort: "created", Direction: "desc",
		ListOptions: gh.ListOptions{PerPage: 1},
	})
	if err != nil {
		return nil, errf(err, "listing pull requests of", owner+"/"+repo)
	}
	if len(ps) == 0 {
		return nil, nil
	}
	return toPR(ps[0]), nil
}

// Blob implements pr.Forge. A blob read once is answered from memory afterwards (blobCache).
//
// GitHub API docs: https://docs.github.com/rest/git/blobs#get-a-blob
func (f *Forge) Blob(ctx context.Context, owner, repo, hash string) ([]byte, error) {
	if data, ok := f.blobs.get(hash); ok {
		return data, nil
	}
	data, err := f.readBlob(ctx, owner, repo, hash)
	if err == nil {
		f.blobs.put(hash, data)
	}
	return data, err
}

// readBlob reads one blob from GitHub.
func (f *Forge) readBlob(ctx context.Context, owner, repo, hash string) ([]byte, error) {
	b, _, err := f.api.Git.GetBlob(ctx, owner, repo, hash)
	if IsNotFound(err) {
		return nil, fmt.Errorf("repo %s/%s: blob %s: %w", owner, repo, hash, pr.ErrNotFound)
	}
	if err != nil {
		return nil, errf(err, "reading blob "+hash+" of", owner+"/"+repo)
	}
	if b.GetEncoding() != "base64" {
		return []byte(b.GetContent()), nil
	}
	data, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(b.GetContent(), "\n", ""))
	if err != nil {
		return nil, fmt.Errorf("repo %s/%s: blob %s: decoding base64: %w", owner, repo, hash, err)
	}
	return data, nil
}

// isText reports whether content can travel inline in a tree request (a JSON string).

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
