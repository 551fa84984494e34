// Package gittree computes git object hashes locally: the blob hash of a
// file's content and the tree hash of a whole repo from a flat listing of
// path -> (mode, blob hash). fleetbot uses it to decide "no change" by
// comparing the hash of the desired tree with the hash a forge reports,
// without downloading a single file, and the local forge uses the same
// encoding to write trees, so both always agree.
package gittree

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Mode is a git tree entry mode.
type Mode uint32

// Git tree entry modes fleetbot knows. Submodules (gitlinks) are kept as they
// are found; fleetbot never writes one.
const (
	ModeFile      Mode = 0o100644
	ModeExec      Mode = 0o100755
	ModeSymlink   Mode = 0o120000
	ModeSubmodule Mode = 0o160000
	ModeDir       Mode = 0o040000
)

// EmptyTree is the hash of the empty git tree.
const EmptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// Entry is one non-directory entry of a tree listing.
type Entry struct {
	Mode Mode `json:"mode"`
	// Hash is the hex object hash: a blob, or a commit for a submodule.
	Hash string `json:"hash"`
}

// Listing is a repo tree flattened to its leaves, keyed by slash-separated
// path relative to the repo root. Directories are implied by the paths.
type Listing map[string]Entry

// Object is an encoded git tree object, ready to be stored.
type Object struct {
	Hash string
	// Data is the raw tree content without the "tree <len>\x00" header.
	Data []byte
}

// BlobHash is the git blob hash of content, as `git hash-object` prints it.
func BlobHash(content []byte) string {
	return plumbing.ComputeHash(plumbing.BlobObject, content).String()
}

// Paths returns the paths of the listing, sorted.
func (l Listing) Paths() []string {
	ps := make([]string, 0, len(l))
	for p := range l {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Clone returns a copy of the listing that can be changed freely.
func (l Listing) Clone() Listing {
	c := make(Listing, len(l))
	for p, e := range l {
		c[p] = e
	}
	return c
}

// Hash returns the git tree hash of the listing.
func Hash(l Listing) (string, error) {
	root, _, err := Trees(l)
	return root, err
}

// Trees encodes every tree object of the listing, children before parents,
// and returns the root tree hash. An empty listing is the empty tree.
func Trees(l Listing) (string, []Object, error) {
	root, err := build(l)
	if err != nil {
		return "", nil, err
	}
	var objs []Object
	h := root.encode(func(data []byte) string { return plumbing.ComputeHash(plumbing.TreeObject, data).String() }, &objs)
	return h, objs, nil
}

// build checks the listing and arranges it in directories.
func build(l Listing) (*dir, error) {
	root := &dir{children: map[string]*dir{}, files: map[string]Entry{}}
	for _, p := range l.Paths() {
		if err := validPath(p); err != nil {
			return nil, err
		}
		e := l[p]
		if e.Mode == ModeDir || e.Mode == 0 {
			return nil, fmt.Errorf("tree entry %q: invalid mode %o", p, e.Mode)
		}
		if _, err := hex.DecodeString(e.Hash); err != nil || len(e.Hash) != 40 {
			return nil, fmt.Errorf("tree entry %q: invalid hash %q", p, e.Hash)
		}
		parts := strings.Split(p, "/")
		d := root
		for i, name := range parts[:len(parts)-1] {
			if _, ok := d.files[name]; ok {
				return nil, fmt.Errorf("path conflict: %q is a file and also a directory of %q", strings.Join(parts[:i+1], "/"), p)
			}
			c, ok := d.children[name]
			if !ok {
				c = &dir{children: map[string]*dir{}, files: map[string]Entry{}}
				d.children[name] = c
			}
			d = c
		}
		name := parts[len(parts)-1]
		if _, ok := d.children[name]; ok {
			return nil, fmt.Errorf("path conflict: %q is a directory and also a file", p)
		}
		d.files[name] = e
	}
	return root, nil
}

func validPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || path.Clean(p) != p || p == "." ||
		strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\x00") {
		return fmt.Errorf("invalid tree path %q: want a clean relative slash-separated path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".git" {
			return fmt.Errorf("invalid tree path %q: .git is reserved", p)
		}
	}
	return nil
}

type dir struct {
	children map[string]*dir
	files    map[string]Entry
}

type treeEntry struct {
	name string
	mode Mode
	hash string
}

// sortKey is git's tree order: directories compare as if their name ended
// with a slash.
func (e treeEntry) sortKey() string {
	if e.mode == ModeDir {
		return e.name + "/"
	}
	return e.name
}

// encode encodes d's tree object, its subdirectories' first, hashes each with hash and
// appends them to objs (when not nil); it returns d's hash.
func (d *dir) encode(hash func(data []byte) string, objs *[]Object) string {
	entries := make([]treeEntry, 0, len(d.children)+len(d.files))
	for name, c := range d.children {
		entries = append(entries, treeEntry{name: name, mode: ModeDir, hash: c.encode(hash, objs)})
	}
	for name, f := range d.files {
		entries = append(entries, treeEntry{name: name, mode: f.Mode, hash: f.Hash})
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].sortKey() < entries[b].sortKey() })
	var buf bytes.Buffer
	for _, e := range entries {
		buf.WriteString(strconv.FormatUint(uint64(e.mode), 8))
		buf.WriteByte(' ')
		buf.WriteString(e.name)
		buf.WriteByte(0)
		raw, _ := hex.DecodeString(e.hash) // validated in Trees
		buf.Write(raw)
	}
	data := buf.Bytes()
	h := hash(data)
	if objs != nil {
		*objs = append(*objs, Object{Hash: h, Data: data})
	}
	return h
}
