package github

import "sync"

// blobCacheBytes bounds the blob content a forge keeps in memory.
const blobCacheBytes = 16 << 20

// blobCache keeps the blobs a forge read, by hash. Git objects are content-addressed, so a
// cached blob is never stale: a plan that reads the old side of a changed manifest (pr.Plan's
// object diff for the pull request body) reads it once per process instead of once per run.
// That matters under a rollout in waves: every wave check plans every cluster whose pull
// request the gate holds, with the same old content, until its wave starts. The oldest blobs
// are forgotten first beyond blobCacheBytes; a blob over an eighth of it is not kept.
type blobCache struct {
	mu    sync.Mutex
	blobs map[string][]byte
	order []string // hashes, oldest first
	size  int
}

// get returns a copy of the cached blob hash.
func (c *blobCache) get(hash string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[hash]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

// put keeps a copy of blob hash, forgetting the oldest blobs beyond blobCacheBytes.
func (c *blobCache) put(hash string, b []byte) {
	if len(b) > blobCacheBytes/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blobs == nil {
		c.blobs = map[string][]byte{}
	}
	if _, ok := c.blobs[hash]; ok {
		return
	}
	for len(c.order) > 0 && c.size+len(b) > blobCacheBytes {
		oldest := c.order[0]
		c.order = c.order[1:]
		c.size -= len(c.blobs[oldest])
		delete(c.blobs, oldest)
	}
	c.blobs[hash] = append([]byte(nil), b...)
	c.order = append(c.order, hash)
	c.size += len(b)
}
