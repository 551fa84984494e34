package githubtest

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/fleetbot-io/fleetbot/internal/gitloose"
)

// gitRepo is one bare repository on disk, opened with go-git for the REST side and used under
// Server.mu only. The server keeps it open between requests (its object cache and reference
// copy stay warm) and drops it whenever git http-backend has run on the repository, so that
// objects and references pushed are always seen. New objects are written by the server's
// loose-object writer (one zlib compressor for all, where go-git's storage allocates one per
// object).
type gitRepo struct {
	dir     string
	st      storer.Storer
	objects cache.Object // the objects st has read or the REST side has written
	loose   *gitloose.Writer
	// refCache is every hash reference (full name -> hash) once read, see loadRefs.
	refCache map[string]plumbing.Hash
}

// initBare creates an empty bare repository whose HEAD points at defaultBranch: what
// git init --bare writes that git and go-git need (go-git's PlainInit, through its
// symlink-resolving file system, cost a few percent of the fake's CPU in tests that create
// repos by the hundred).
func initBare(dir, defaultBranch string) error {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return fmt.Errorf("creating bare repository %s: %w", dir, git.ErrRepositoryAlreadyExists)
	}
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("creating bare repository %s: %w", dir, err)
		}
	}
	files := []struct{ name, content string }{
		{"config", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"},
		{"HEAD", "ref: " + plumbing.NewBranchReferenceName(defaultBranch).String() + "\n"},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("creating bare repository %s: %w", dir, err)
		}
	}
	return nil
}

// repoObjectCache bounds the decoded objects (mostly trees and commits) kept per open repository.
const repoObjectCache = 4 * cache.MiByte

// openGit opens the bare repository dir; loose writes its new objects and is used under
// Server.mu only.
func openGit(dir string, loose *gitloose.Writer) (*gitRepo, error) {
	if fi, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || fi.IsDir() {
		if err == nil {
			err = git.ErrRepositoryNotExists
		}
		return nil, fmt.Errorf("opening repository %s: %w", dir, err)
	}
	// A small object cache: the server keeps every repository it has served open.
	objects := cache.NewObjectLRU(repoObjectCache)
	st := &cachedStorer{Storer: filesystem.NewStorage(osfs.New(dir), objects), cache: objects}
	return &gitRepo{dir: dir, st: st, objects: objects, loose: loose}, nil
}

// cachedStorer answers object reads from the object cache before going to disk: go-git's
// filesystem storage opens a loose object's file before it looks in that same cache. Objects
// never change, and the fake deletes none (git http-backend, which could repack, drops the
// whole gitRepo).
type cachedStorer struct {
	storer.Storer
	cache cache.Object
}

func (c *cachedStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, ok := c.cache.Get(h); ok {
		if t != plumbing.AnyObject && o.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return o, nil
	}
	o, err := c.Storer.EncodedObject(t, h)
	if err != nil {
		return nil, err
	}
	c.cache.Put(o)
	return o, nil
}

func (c *cachedStorer) HasEncodedObject(h plumbing.Hash) error {
	if _, ok := c.cache.Get(h); ok {
		return nil
	}
	return c.Storer.HasEncodedObject(h)
}

func (c *cachedStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if o, ok := c.cache.Get(h); ok {
		return o.Size(), nil
	}
	return c.Storer.EncodedObjectSize(h)
}

// store writes an object (a blob's content, an encoded tree or commit) as a loose object.
// The request that writes an object usually reads it back (a new tree's listing, a new
// commit's JSON): it goes to the cache as well.
func (g *gitRepo) store(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h, err := g.loose.Write(filepath.Join(g.dir, "objects"), t, data)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("storing %s: %w", t, err)
	}
	o := &plumbing.MemoryObject{}
	o.SetType(t)
	if _, err := o.Write(data); err == nil {
		g.objects.Put(o)
	}
	return h, nil
}

// storeEncoded writes an object encoded by go-git (a tree, a commit) into a MemoryObject.
func (g *gitRepo) storeEncoded(o *plumbing.MemoryObject) (plumbing.Hash, error) {
	h, err := g.loose.WriteObject(filepath.Join(g.dir, "objects"), o)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("storing %s: %w", o.Type(), err)
	}
	g.objects.Put(o)
	return h, nil
}

// setHead points HEAD at a branch (the repository's default branch).
func (g *gitRepo) setHead(branch string) error {
	ref := plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(branch))
	return g.st.SetReference(ref)
}

// loadRefs reads every hash reference once per opening: the REST side changes references
// only through setRef and deleteRef, which keep the copy current, and a push through git
// http-backend drops the whole opened repository (see Server.openRepoGit).
func (g *gitRepo) loadRefs() (map[string]plumbing.Hash, error) {
	if g.refCache != nil {
		return g.refCache, nil
	}
	iter, err := g.st.IterReferences()
	if err != nil {
		return nil, fmt.Errorf("listing references: %w", err)
	}
	out := map[string]plumbing.Hash{}
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference {
			out[ref.Name().String()] = ref.Hash()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing references: %w", err)
	}
	g.refCache = out
	return out, nil
}

// branches returns branch name -> commit hash.
func (g *gitRepo) branches() (map[string]plumbing.Hash, error) {
	refs, err := g.loadRefs()
	if err != nil {
		return nil, err
	}
	out := map[string]plumbing.Hash{}
	for name, h := range refs {
		if n := plumbing.ReferenceName(name); n.IsBranch() {
			out[n.Short()] = h
		}
	}
	return out, nil
}

// refs returns every hash reference (full name -> hash).
func (g *gitRepo) refs() (map[string]plumbing.Hash, error) {
	refs, err := g.loadRefs()
	if err != nil {
		return nil, err
	}
	return maps.Clone(refs), nil
}

func (g *gitRepo) empty() bool {
	refs, err := g.loadRefs()
	if err != nil {
		return true
	}
	for name := range refs {
		if plumbing.ReferenceName(name).IsBranch() {
			return false
		}
	}
	return true
}

// ref returns the hash of a full reference name.
func (g *gitRepo) ref(name string) (plumbing.Hash, bool) {
	refs, err := g.loadRefs()
	if err != nil {
		return plumbing.ZeroHash, false
	}
	h, ok := refs[name]
	return h, ok
}

func (g *gitRepo) branch(name string) (plumbing.Hash, bool) {
	return g.ref("refs/heads/" + name)
}

func (g *gitRepo) setRef(name string, h plumbing.Hash) error {
	if err := g.st.SetReference(plumbing.NewHashReference(plumbing.ReferenceName(name), h)); err != nil {
		g.refCache = nil // the file may or may not have been written: read it again
		return fmt.Errorf("setting %s: %w", name, err)
	}
	if g.refCache != nil {
		g.refCache[name] = h
	}
	return nil
}

func (g *gitRepo) deleteRef(name string) error {
	if err := g.st.RemoveReference(plumbing.ReferenceName(name)); err != nil {
		g.refCache = nil
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	if g.refCache != nil {
		delete(g.refCache, name)
	}
	return nil
}

func (g *gitRepo) objectType(h plumbing.Hash) (plumbing.ObjectType, bool) {
	o, err := g.st.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return plumbing.InvalidObject, false
	}
	return o.Type(), true
}

func (g *gitRepo) writeBlob(data []byte) (plumbing.Hash, error) {
	return g.store(plumbing.BlobObject, data)
}

func (g *gitRepo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(g.st, h)
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w", h, err)
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

func (g *gitRepo) commit(h plumbing.Hash) (*object.Commit, error) {
	c, err := object.GetCommit(g.st, h)
	if err != nil {
		return nil, fmt.Errorf("reading commit %s: %w", h, err)
	}
	return c, nil
}

// resolveCommit resolves a branch name, tag, full ref or commit SHA to a commit.
func (g *gitRepo) resolveCommit(rev string) (*object.Commit, error) {
	rev = strings.TrimPrefix(rev, "refs/")
	for _, name := range []string{"refs/heads/" + rev, "refs/tags/" + rev, "refs/" + rev} {
		if h, ok := g.ref(name); ok {
			return g.peel(h)
		}
	}
	if isSHA(rev) {
		return g.peel(plumbing.NewHash(rev))
	}
	return nil, plumbing.ErrReferenceNotFound
}

// peel follows annotated tags to a commit.
func (g *gitRepo) peel(h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		t, ok := g.objectType(h)
		if !ok {
			return nil, plumbing.ErrObjectNotFound
		}
		switch t {
		case plumbing.CommitObject:
			return g.commit(h)
		case plumbing.TagObject:
			tag, err := object.GetTag(g.st, h)
			if err != nil {
				return nil, err
			}
			h = tag.Target
		default:
			return nil, plumbing.ErrObjectNotFound
		}
	}
	return nil, plumbing.ErrObjectNotFound
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// flatEntry is a leaf of a tree: a blob, symlink or submodule at a full path.
type flatEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// flatten lists every leaf under a tree by full path.
func (g *gitRepo) flatten(treeHash plumbing.Hash) (map[string]flatEntry, error) {
	out := map[string]flatEntry{}
	if treeHash.IsZero() {
		return out, nil
	}
	var walk func(prefix string, h plumbing.Hash) error
	walk = func(prefix string, h plumbing.Hash) error {
		t, err := object.GetTree(g.st, h)
		if err != nil {
			return fmt.Errorf("reading tree %s: %w", h, err)
		}
		for _, e := range t.Entries {
			p := path.Join(prefix, e.Name)
			if e.Mode == filemode.Dir {
				if err := walk(p, e.Hash); err != nil {
					return err
				}
				continue
			}
			out[p] = flatEntry{mode: e.Mode, hash: e.Hash}
		}
		return nil
	}
	return out, walk("", treeHash)
}

// buildTree writes the nested trees for a flat path map and returns the root tree hash.
func (g *gitRepo) buildTree(flat map[string]flatEntry) (plumbing.Hash, error) {
	type dir struct {
		files map[string]flatEntry
		dirs  map[string]map[string]flatEntry
	}
	d := dir{files: map[string]flatEntry{}, dirs: map[string]map[string]flatEntry{}}
	for p, e := range flat {
		first, rest, nested := strings.Cut(p, "/")
		if !nested {
			d.files[first] = e
			continue
		}
		if d.dirs[first] == nil {
			d.dirs[first] = map[string]flatEntry{}
		}
		d.dirs[first][rest] = e
	}
	t := &object.Tree{}
	for name, e := range d.files {
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
	}
	for name, sub := range d.dirs {
		h, err := g.buildTree(sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(t.Entries))
	o := &plumbing.MemoryObject{}
	if err := t.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding tree: %w", err)
	}
	return g.storeEncoded(o)
}

func (g *gitRepo) writeCommit(c *object.Commit) (plumbing.Hash, error) {
	o := &plumbing.MemoryObject{}
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encoding commit: %w", err)
	}
	return g.storeEncoded(o)
}

// isAncestor reports whether a is b or an ancestor of b.
func (g *gitRepo) isAncestor(a, b plumbing.Hash) bool {
	if a == b {
		return true
	}
	ca, err := g.commit(a)
	if err != nil {
		return false
	}
	cb, err := g.commit(b)
	if err != nil {
		return false
	}
	ok, err := ca.IsAncestor(cb)
	return err == nil && ok
}

// mergeBase returns a best common ancestor of a and b (zero when unrelated).
func (g *gitRepo) mergeBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	ca, err := g.commit(a)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	cb, err := g.commit(b)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("merge base of %s and %s: %w", a, b, err)
	}
	if len(bases) == 0 {
		return plumbing.ZeroHash, nil
	}
	return bases[0].Hash, nil
}

// reachable lists the commits reachable from tip and not from any of stop, newest first.
func (g *gitRepo) reachable(tip plumbing.Hash, stop plumbing.Hash) ([]*object.Commit, error) {
	excluded := map[plumbing.Hash]bool{}
	if !stop.IsZero() {
		c, err := g.commit(stop)
		if err != nil {
			return nil, err
		}
		iter := object.NewCommitPreorderIter(c, nil, nil)
		_ = iter.ForEach(func(c *object.Commit) error { excluded[c.Hash] = true; return nil })
	}
	c, err := g.commit(tip)
	if err != nil {
		return nil, err
	}
	var out []*object.Commit
	iter := object.NewCommitPreorderIter(c, excluded, nil)
	err = iter.ForEach(func(c *object.Commit) error {
		if !excluded[c.Hash] {
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// errConflict is a merge that touches the same path differently on both sides.
var errConflict = errors.New("merge conflict")

// mergeTrees does a path-level three-way merge of ours and theirs against base.
func (g *gitRepo) mergeTrees(base, ours, theirs plumbing.Hash) (plumbing.Hash, error) {
	fb, err := g.flatten(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	fo, err := g.flatten(ours)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	ft, err := g.flatten(theirs)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	out := map[string]flatEntry{}
	paths := map[string]bool{}
	for _, m := range []map[string]flatEntry{fb, fo, ft} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range paths {
		b, inB := fb[p]
		o, inO := fo[p]
		t, inT := ft[p]
		switch {
		case inO == inT && o == t:
			if inO {
				out[p] = o
			}
		case inB == inO && b == o: // only theirs changed
			if inT {
				out[p] = t
			}
		case inB == inT && b == t: // only ours changed
			if inO {
				out[p] = o
			}
		default:
			return plumbing.ZeroHash, fmt.Errorf("%w on %s", errConflict, p)
		}
	}
	return g.buildTree(out)
}

// readFile returns a file's content and blob hash at a commit.
func (g *gitRepo) readFile(c *object.Commit, p string) ([]byte, plumbing.Hash, error) {
	t, err := c.Tree()
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	e, err := t.FindEntry(strings.Trim(p, "/"))
	if err != nil || e.Mode == filemode.Dir {
		return nil, plumbing.ZeroHash, os.ErrNotExist
	}
	data, err := g.blob(e.Hash)
	return data, e.Hash, err
}
