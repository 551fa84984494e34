package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/fleetbot-io/fleetbot/internal/gitloose"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// openStore opens the bare repo, or returns pr.ErrNotFound.
func (f *Forge) openStore(p repoPaths) (*filesystem.Storage, error) {
	st, err := os.Stat(filepath.Join(p.git, "HEAD"))
	if err != nil || st.IsDir() {
		if errors.Is(err, os.ErrNotExist) || err == nil {
			return nil, fmt.Errorf("repo %s: %w", p.full, pr.ErrNotFound)
		}
		return nil, fmt.Errorf("repo %s: %w", p.full, err)
	}
	return filesystem.NewStorage(osfs.New(p.git), cache.NewObjectLRUDefault()), nil
}

func branchRef(b string) plumbing.ReferenceName { return plumbing.NewBranchReferenceName(b) }

// resolveBranch returns the commit a branch points at, or nil.
func resolveBranch(s *filesystem.Storage, branch string) (*object.Commit, error) {
	ref, err := s.Reference(branchRef(branch))
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading branch %s: %w", branch, err)
	}
	c, err := object.GetCommit(s, ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("reading commit %s of branch %s: %w", ref.Hash(), branch, err)
	}
	return c, nil
}

func toCommit(c *object.Commit) *pr.Commit {
	if c == nil {
		return nil
	}
	out := &pr.Commit{
		SHA: c.Hash.String(), Tree: c.TreeHash.String(), Message: c.Message,
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	return out
}

// listing flattens a tree to path -> (mode, hash), failing on any missing
// object instead of skipping it.
func listing(s *filesystem.Storage, treeHash plumbing.Hash) (gittree.Listing, error) {
	l := gittree.Listing{}
	var walk func(prefix string, h plumbing.Hash) error
	walk = func(prefix string, h plumbing.Hash) error {
		t, err := object.GetTree(s, h)
		if err != nil {
			return fmt.Errorf("reading tree %s (%q): %w", h, prefix, err)
		}
		for _, e := range t.Entries {
			p := e.Name
			if prefix != "" {
				p = prefix + "/" + e.Name
			}
			if e.Mode == filemode.Dir {
				if err := walk(p, e.Hash); err != nil {
					return err
				}
				continue
			}
			l[p] = gittree.Entry{Mode: gittree.Mode(e.Mode), Hash: e.Hash.String()}
		}
		return nil
	}
	if err := walk("", treeHash); err != nil {
		return nil, err
	}
	return l, nil
}

func hasBranches(s *filesystem.Storage) (bool, error) {
	it, err := s.IterReferences()
	if err != nil {
		return false, err
	}
	defer it.Close()
	found := false
	err = it.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() && r.Type() == plumbing.HashReference {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	return found, err
}

// Snapshot implements pr.Forge: the default branch head and tree listing,
// the bot branch head and the latest pull request from the bot branch. An
// open PR whose head reached the default branch (pushed, fast-forwarded or
// merged with plain git, or squashed to the same tree) is reported merged.
func (f *Forge) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := f.paths(owner, repo)
	if err != nil {
		return nil, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if errors.Is(err, pr.ErrNotFound) {
		return &pr.Snapshot{}, nil
	}
	if err != nil {
		return nil, err
	}
	snap := &pr.Snapshot{Exists: true}
	base, err := resolveBranch(s, defaultBranch)
	if err != nil {
		return nil, fmt.Errorf("repo %s: %w", p.full, err)
	}
	if base == nil {
		any, err := hasBranches(s)
		if err != nil {
			return nil, fmt.Errorf("repo %s: listing branches: %w", p.full, err)
		}
		snap.Empty = !any
	} else {
		snap.Base = toCommit(base)
		if snap.Files, err = listing(s, base.TreeHash); err != nil {
			return nil, fmt.Errorf("repo %s: %w", p.full, err)
		}
		readHealth(p.statuses, snap.Base)
	}
	bot, err := resolveBranch(s, botBranch)
	if err != nil {
		return nil, fmt.Errorf("repo %s: %w", p.full, err)
	}
	snap.Bot = toCommit(bot)

	pulls, err := readPulls(p.pulls)
	if err != nil {
		return nil, err
	}
	var latest *pull
	for i := range pulls {
		q := &pulls[i]
		if q.Head == botBranch && q.Base == defaultBranch && (latest == nil || q.Number > latest.Number) {
			latest = q
		}
	}
	if latest != nil {
		out := latest.toPR(p.full)
		if out.State == pr.StateOpen {
			if bot != nil {
				out.HeadSHA = bot.Hash.String()
			}
			merged, err := mergedInto(s, out.HeadSHA, base)
			if err != nil {
				return nil, fmt.Errorf("repo %s: PR #%d: %w", p.full, out.Number, err)
			}
			if merged {
				out.State, out.Inferred = pr.StateMerged, true
			}
		}
		snap.PR = out
	}
	return snap, nil
}

// mergedInto reports whether head reached base: equal, an ancestor, or the
// same tree (a squash merge).
func mergedInto(s *filesystem.Storage, head string, base *object.Commit) (bool, error) {
	if head == "" || base == nil {
		return false, nil
	}
	h := plumbing.NewHash(head)
	if h == base.Hash {
		return true, nil
	}
	hc, err := object.GetCommit(s, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if hc.TreeHash == base.TreeHash {
		return true, nil
	}
	return hc.IsAncestor(base)
}

// Blob implements pr.Forge.
func (f *Forge) Blob(ctx context.Context, owner, repo, hash string) ([]byte, error) {
	p, err := f.paths(owner, repo)
	if err != nil {
		return nil, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return nil, err
	}
	b, err := object.GetBlob(s, plumbing.NewHash(hash))
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("repo %s: blob %s: %w", p.full, hash, pr.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("repo %s: blob %s: %w", p.full, hash, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("repo %s: blob %s: %w", p.full, hash, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

// ErrRepoExists is returned by CreateRepo for a repo that already exists.
var ErrRepoExists = errors.New("repo already exists")

// CreateRepo implements pr.Forge: an empty bare repo whose HEAD names the
// default branch, and its settings.json (managedBy fleetbot, access).
func (f *Forge) CreateRepo(ctx context.Context, spec pr.RepoSpec) error {
	p, err := f.paths(spec.Owner, spec.Repo)
	if err != nil {
		return err
	}
	defer f.lockRepo(spec.Owner, spec.Repo)()
	if _, err := os.Stat(p.git); err == nil {
		return fmt.Errorf("creating %s: %w", p.full, ErrRepoExists)
	}
	if err := os.MkdirAll(filepath.Dir(p.git), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", p.full, err)
	}
	_, err = git.PlainInitWithOptions(p.git, &git.PlainInitOptions{
		Bare:        true,
		InitOptions: git.InitOptions{DefaultBranch: branchRef(spec.DefaultBranch)},
	})
	if err != nil {
		return fmt.Errorf("creating %s: %w", p.full, err)
	}
	st := settings{
		ManagedBy: ManagedBy, Kind: spec.Kind, Name: spec.Name, Visibility: spec.Visibility,
		DefaultBranch: spec.DefaultBranch,
	}
	org, err := f.orgTeams(spec.Owner)
	if err != nil {
		return fmt.Errorf("creating %s: %w", p.full, err)
	}
	access := spec.Access.Clone()
	access.Teams = policy.TeamsToGrant(access.Teams, org.BaseRole)
	// Declared branch rules are enforced from the start: the repo's own ruleset, or the org's.
	if rs := policy.DesiredRuleset(access); rs != nil {
		access.Protection = nil // the ruleset enforces it, as on GitHub
		if rs.Organization {
			if err := f.writeOrgRuleset(spec.Owner, rs); err != nil {
				return fmt.Errorf("creating %s: %w", p.full, err)
			}
		} else {
			access.Ruleset = rs
		}
	}
	st.setAccess(access)
	if err := writeSettings(p.settings, st); err != nil {
		return fmt.Errorf("creating %s: %w", p.full, err)
	}
	f.log.Debug("created repo", "repo", p.full)
	return nil
}

func (f *Forge) signature() object.Signature {
	return object.Signature{Name: CommitterName, Email: CommitterEmail, When: f.opts.Now()}
}

// Commit implements pr.Forge: it writes the blobs, the trees (encoded by
// gittree, so the tree hash is exactly the one fleetbot computed) and one
// commit, and moves no branch.
func (f *Forge) Commit(ctx context.Context, owner, repo string, nc pr.NewCommit) (pr.Commit, error) {
	if err := ctx.Err(); err != nil {
		return pr.Commit{}, err
	}
	p, err := f.paths(owner, repo)
	if err != nil {
		return pr.Commit{}, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return pr.Commit{}, err
	}
	// One compressor for every object (go-git's storage takes a fresh one per object).
	lw := looseWriter{s: s, w: f.writers.Get(), objects: filepath.Join(p.git, "objects")}
	defer f.writers.Put(lw.w)
	l := gittree.Listing{}
	if nc.BaseTree != "" && nc.BaseTree != gittree.EmptyTree {
		if l, err = listing(s, plumbing.NewHash(nc.BaseTree)); err != nil {
			return pr.Commit{}, fmt.Errorf("repo %s: %w", p.full, err)
		}
	}
	for _, c := range nc.Changes {
		if c.Delete {
			delete(l, c.Path)
			continue
		}
		h, err := lw.store(plumbing.BlobObject, c.Content)
		if err != nil {
			return pr.Commit{}, fmt.Errorf("repo %s: writing %s: %w", p.full, c.Path, err)
		}
		mode := c.Mode
		if mode == 0 {
			mode = gittree.ModeFile
		}
		l[c.Path] = gittree.Entry{Mode: mode, Hash: h.String()}
	}
	root, trees, err := gittree.Trees(l)
	if err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: %w", p.full, err)
	}
	for _, t := range trees {
		h, err := lw.store(plumbing.TreeObject, t.Data)
		if err != nil {
			return pr.Commit{}, fmt.Errorf("repo %s: writing tree: %w", p.full, err)
		}
		if h.String() != t.Hash {
			return pr.Commit{}, fmt.Errorf("repo %s: tree hash mismatch: stored %s, computed %s", p.full, h, t.Hash)
		}
	}
	c := &object.Commit{
		Author: f.signature(), Committer: f.signature(),
		Message: nc.Message, TreeHash: plumbing.NewHash(root),
	}
	if nc.Parent != "" {
		ph := plumbing.NewHash(nc.Parent)
		if _, err := object.GetCommit(s, ph); err != nil {
			return pr.Commit{}, fmt.Errorf("repo %s: parent %s: %w", p.full, nc.Parent, err)
		}
		c.ParentHashes = []plumbing.Hash{ph}
	}
	obj := &plumbing.MemoryObject{}
	if err := c.Encode(obj); err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: encoding commit: %w", p.full, err)
	}
	h, err := lw.w.WriteObject(lw.objects, obj)
	if err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: writing commit: %w", p.full, err)
	}
	c.Hash = h
	return *toCommit(c), nil
}

// looseWriter stores a commit's objects in a repo as loose objects, skipping those it
// already has (loose or packed).
type looseWriter struct {
	s       *filesystem.Storage
	w       *gitloose.Writer
	objects string // the repo's objects directory
}

func (lw looseWriter) store(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, data)
	if err := lw.s.HasEncodedObject(h); err == nil {
		return h, nil
	}
	return lw.w.Write(lw.objects, t, data)
}

// SetBranch implements pr.Forge: a compare-and-swap of the branch from expect to sha, under
// the repo's lock and through go-git's CheckAndSetReference (which re-reads the ref file under
// its file lock before writing it), so that a branch moved by anyone else since the caller read
// it is refused with pr.ErrRefMoved, never overwritten.
func (f *Forge) SetBranch(ctx context.Context, owner, repo, branch, sha, expect string) error {
	p, err := f.paths(owner, repo)
	if err != nil {
		return err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return err
	}
	return setBranch(s, p.full, branch, sha, expect)
}

// setBranch moves branch from expect ("" absent) to sha, refusing with pr.ErrRefMoved when the
// branch is elsewhere.
func setBranch(s *filesystem.Storage, full, branch, sha, expect string) error {
	h := plumbing.NewHash(sha)
	if _, err := object.GetCommit(s, h); err != nil {
		return fmt.Errorf("repo %s: branch %s: commit %s: %w", full, branch, sha, err)
	}
	name := branchRef(branch)
	cur, err := branchHead(s, full, name)
	if err != nil {
		return err
	}
	if cur != expect {
		if cur == sha {
			return nil // moved there already (a repeated call)
		}
		return refMoved(full, branch, cur, expect)
	}
	if cur == sha {
		return nil
	}
	var old *plumbing.Reference
	if expect != "" {
		old = plumbing.NewHashReference(name, plumbing.NewHash(expect))
	}
	err = s.CheckAndSetReference(plumbing.NewHashReference(name, h), old)
	if errors.Is(err, storage.ErrReferenceHasChanged) {
		now, _ := branchHead(s, full, name)
		return refMoved(full, branch, now, expect)
	}
	if err != nil {
		return fmt.Errorf("repo %s: setting branch %s: %w", full, branch, err)
	}
	return nil
}

// branchHead is the commit a branch points at, "" when it does not exist.
func branchHead(s *filesystem.Storage, full string, name plumbing.ReferenceName) (string, error) {
	ref, err := s.Reference(name)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("repo %s: reading %s: %w", full, name.Short(), err)
	}
	return ref.Hash().String(), nil
}

// refMoved is the error of a branch found at cur when the caller expected it at expect.
func refMoved(full, branch, cur, expect string) error {
	at := func(h string) string {
		if h == "" {
			return "absent"
		}
		return "at " + h[:min(len(h), 7)]
	}
	return fmt.Errorf("repo %s: branch %s is %s, not %s as read: %w", full, branch, at(cur), at(expect), pr.ErrRefMoved)
}

// ErrBranchHasOpenPR is returned by DeleteBranch for the head branch of an
// open pull request.
var ErrBranchHasOpenPR = errors.New("branch is the head of an open pull request")

// DeleteBranch implements pr.Forge. It refuses to delete the head branch of an open pull
// request, and a branch no longer at expect (pr.ErrRefMoved); a missing branch is not an error.
func (f *Forge) DeleteBranch(ctx context.Context, owner, repo, branch, expect string) error {
	p, err := f.paths(owner, repo)
	if err != nil {
		return err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return err
	}
	pulls, err := readPulls(p.pulls)
	if err != nil {
		return err
	}
	for _, q := range pulls {
		if q.State == pr.StateOpen && q.Head == branch {
			return fmt.Errorf("repo %s: deleting %s: %w (#%d)", p.full, branch, ErrBranchHasOpenPR, q.Number)
		}
	}
	cur, err := branchHead(s, p.full, branchRef(branch))
	switch {
	case err != nil:
		return err
	case cur == "":
		return nil
	case cur != expect:
		return refMoved(p.full, branch, cur, expect)
	}
	if err := s.RemoveReference(branchRef(branch)); err != nil && !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return fmt.Errorf("repo %s: deleting %s: %w", p.full, branch, err)
	}
	return nil
}

// Refs returns every branch of the repo and the commit it points at: for
// tests and status output.
func (f *Forge) Refs(owner, repo string) (map[string]string, error) {
	p, err := f.paths(owner, repo)
	if err != nil {
		return nil, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return nil, err
	}
	it, err := s.IterReferences()
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[string]string{}
	err = it.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() {
			out[strings.TrimPrefix(r.Name().String(), "refs/heads/")] = r.Hash().String()
		}
		return nil
	})
	return out, err
}

// Capabilities implements pr.Forge: the local forge records merges done with
// plain git and checks CODEOWNERS offline; it has no batched scan, no write
// budget and can always protect a branch.
func (f *Forge) Capabilities() pr.Capabilities {
	return pr.Capabilities{MergeRecorder: f, Codeowners: f, Rollout: f, Restorer: f}
}

var _ pr.Forge = (*Forge)(nil)

// readHealth sets a default-branch head's health, for status views only, from the statuses
// posted on it (statuses.json). A corrupt file leaves it unknown here; the rollout, which
// decides on it, reports the file.
func readHealth(statuses string, head *pr.Commit) {
	all, err := readStatuses(statuses)
	if err != nil {
		return
	}
	newest := newestStatuses(all, head.SHA)
	head.Status, head.Failing = combined(newest), pr.Failing(newest)
}
