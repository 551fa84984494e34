package gittree

import (
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// DefaultCacheBytes bounds a Cache by default: the contents of a 1,000-cluster fleet's
// targets, which a service renders again on every control-repo commit, fit several times.
const DefaultCacheBytes = 64 << 20

// Cache remembers the git hashes it computed, keyed by the hashed bytes themselves (a blob's
// content, a tree object's encoding): exact, so a hit is always right, whatever produced the
// bytes. A service renders the control repo again on every commit and plans every target of
// the new render; almost all of its files and directories are byte for byte those of the last
// render, and hashing them again (SHA-1 with collision detection) was a fifth of its CPU.
//
// It keeps two generations: a lookup that hits the older one moves the entry to the current
// one, and when the current one holds half the byte budget it becomes the older one, the
// older one is dropped. What a busy service keeps using stays; the rest goes within two
// generations. A nil *Cache computes every hash. It is safe for concurrent use.
type Cache struct {
	half int

	mu       sync.Mutex
	cur, old generation
}

// generation is one generation of a Cache: hashes by the hashed bytes, blobs and tree objects
// apart, derived hashes by their keys (Memo), and how many bytes its keys hold.
type generation struct {
	blobs, trees, derived map[string]string
	bytes                 int
}

func newGeneration() generation {
	return generation{blobs: map[string]string{}, trees: map[string]string{}, derived: map[string]string{}}
}

// memoType is the object type under which Memo keeps its entries.
const memoType = plumbing.InvalidObject

func (g generation) of(t plumbing.ObjectType) map[string]string {
	switch t {
	case plumbing.TreeObject:
		return g.trees
	case memoType:
		return g.derived
	}
	return g.blobs
}

// NewCache returns a Cache holding at most about maxBytes of hashed content
// (DefaultCacheBytes if maxBytes <= 0).
func NewCache(maxBytes int) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{half: maxBytes / 2, cur: newGeneration(), old: newGeneration()}
}

// BlobHash is BlobHash(content), from the cache when content was hashed before.
func (c *Cache) BlobHash(content []byte) string {
	return c.hash(plumbing.BlobObject, content)
}

// Hash is Hash(l), with every tree object's hash from the cache when it was hashed before.
func (c *Cache) Hash(l Listing) (string, error) {
	root, err := build(l)
	if err != nil {
		return "", err
	}
	return root.encode(func(data []byte) string { return c.hash(plumbing.TreeObject, data) }, nil), nil
}

// Memo returns the hash compute returns, remembered under key: for a hash derived from other
// hashes (a tree made of a known base tree and known files), whose key must name everything it
// depends on. An error is not remembered. A nil Cache calls compute every time.
func (c *Cache) Memo(key string, compute func() (string, error)) (string, error) {
	if c == nil {
		return compute()
	}
	c.mu.Lock()
	h, ok := c.lookup(memoType, []byte(key))
	c.mu.Unlock()
	if ok {
		return h, nil
	}
	h, err := compute()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.put(memoType, []byte(key), h)
	c.mu.Unlock()
	return h, nil
}

// lookup finds the entry of data among objects of type t, moving it to the current generation
// when the older one holds it; call with c.mu held.
func (c *Cache) lookup(t plumbing.ObjectType, data []byte) (string, bool) {
	h, ok := c.cur.of(t)[string(data)]
	if !ok {
		if h, ok = c.old.of(t)[string(data)]; ok {
			c.put(t, data, h)
		}
	}
	return h, ok
}

// hash returns the hash of an object of type t (a blob or a tree) with data, computing it on a
// miss.
func (c *Cache) hash(t plumbing.ObjectType, data []byte) string {
	if c == nil {
		return plumbing.ComputeHash(t, data).String()
	}
	c.mu.Lock()
	h, ok := c.lookup(t, data)
	c.mu.Unlock()
	if ok {
		return h
	}
	h = plumbing.ComputeHash(t, data).String()
	c.mu.Lock()
	c.put(t, data, h)
	c.mu.Unlock()
	return h
}

// put adds an entry to the current generation, starting a new one when it is full; call with
// c.mu held.
func (c *Cache) put(t plumbing.ObjectType, data []byte, h string) {
	if _, ok := c.cur.of(t)[string(data)]; ok || len(data) > c.half {
		return // known, or too large to keep
	}
	if c.cur.bytes+len(data) > c.half {
		c.old, c.cur = c.cur, newGeneration()
	}
	c.cur.of(t)[string(data)] = h
	c.cur.bytes += len(data)
}
