package control

import "sync"

// DefaultCacheBytes bounds a Cache by default: the cluster files of a 10,000-cluster control
// repo fit.
const DefaultCacheBytes = 32 << 20

// Cache keeps the clusters LoadCached decoded, by file name and content, for a service that
// loads commit after commit of one control repo: a commit that changes one cluster file decodes
// that file only (decoding every cluster file was most of a load, and a service loads the
// control repo on every push and for every pull request check). Only a file decoded without a
// problem is kept; validation, which weighs every object against the others, runs on every
// load. The clusters are shared by every Repo loaded with the cache: a Cluster is never changed
// once loaded.
//
// It keeps two generations, bounded by the bytes of the files they hold: a hit in the older one
// moves the entry to the current one, and when the current one is full it becomes the older
// one. A nil *Cache keeps nothing. It is safe for concurrent use.
type Cache struct {
	half int

	mu       sync.Mutex
	cur, old map[string]*Cluster
	curBytes int
}

// NewCache returns a Cache holding the clusters of at most about maxBytes of files
// (DefaultCacheBytes if maxBytes <= 0).
func NewCache(maxBytes int) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{half: maxBytes / 2, cur: map[string]*Cluster{}, old: map[string]*Cluster{}}
}

// cacheKey names a file by name and content (a name holds no NUL).
func cacheKey(name string, data []byte) string {
	return name + "\x00" + string(data)
}

// cluster returns the Cluster decoded from this file before, nil when there is none.
func (c *Cache) cluster(name string, data []byte) *Cluster {
	if c == nil {
		return nil
	}
	key := cacheKey(name, data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.cur[key]; ok {
		return cl
	}
	cl, ok := c.old[key]
	if ok {
		c.add(key, cl)
	}
	return cl
}

// put keeps the Cluster decoded from this file.
func (c *Cache) put(name string, data []byte, cl *Cluster) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(cacheKey(name, data), cl)
}

// add adds an entry to the current generation, starting a new one when it is full; call with
// c.mu held.
func (c *Cache) add(key string, cl *Cluster) {
	if _, ok := c.cur[key]; ok || len(key) > c.half {
		return
	}
	if c.curBytes+len(key) > c.half {
		c.old, c.cur, c.curBytes = c.cur, map[string]*Cluster{}, 0
	}
	c.cur[key] = cl
	c.curBytes += len(key)
}
