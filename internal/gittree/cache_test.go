package gittree

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCacheHashesAsGitDoes: a Cache answers exactly what BlobHash and Hash compute, hit or miss,
// a nil one too; a blob and a tree object with the same bytes are not confused.
func TestCacheHashesAsGitDoes(t *testing.T) {
	t.Parallel()
	l := Listing{
		"README.md":             {Mode: ModeFile, Hash: BlobHash([]byte("# hi\n"))},
		"platform/metallb.yaml": {Mode: ModeFile, Hash: BlobHash([]byte("kind: A\n"))},
		"platform/sub/x.txt":    {Mode: ModeExec, Hash: BlobHash([]byte("x"))},
	}
	want, err := Hash(l)
	require.NoError(t, err)
	_, objs, err := Trees(l)
	require.NoError(t, err)
	for _, c := range []*Cache{nil, NewCache(0)} {
		for range 2 { // a miss, then a hit
			got, err := c.Hash(l)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, "ce013625030ba8dba906f756967f9e9ca394464a", c.BlobHash([]byte("hello\n")))
			// The root tree's bytes hashed as a blob are a blob, not the tree.
			assert.Equal(t, BlobHash(objs[len(objs)-1].Data), c.BlobHash(objs[len(objs)-1].Data))
		}
	}
	_, err = NewCache(0).Hash(Listing{"../x": {Mode: ModeFile, Hash: BlobHash(nil)}})
	assert.ErrorContains(t, err, "invalid tree path", "the listing is checked as Hash checks it")
}

// TestCacheIsBounded: the cache keeps at most about its byte budget in two generations; what is
// used keeps being answered, and every answer stays right.
func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := NewCache(10 << 10) // two generations of 5 KiB
	content := func(i int) []byte { return fmt.Appendf(nil, "%01000d", i) }
	for i := range 100 {
		assert.Equal(t, BlobHash(content(i)), c.BlobHash(content(i)))
		assert.Equal(t, BlobHash(content(0)), c.BlobHash(content(0)), "kept in use, kept")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.LessOrEqual(t, c.cur.bytes, 5<<10)
	assert.LessOrEqual(t, c.old.bytes, 5<<10)
	_, kept := c.cur.blobs[string(content(0))]
	_, keptOld := c.old.blobs[string(content(0))]
	assert.True(t, kept || keptOld, "the entry in use is still cached")
	assert.NotContains(t, c.cur.blobs, string(content(1)), "an old entry left")
	assert.NotContains(t, c.old.blobs, string(content(1)), "an old entry left")
}

// TestCacheConcurrent: many goroutines hashing the same and different contents get git's
// answers (run with -race).
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	c := NewCache(4 << 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				b := fmt.Appendf(nil, "file %d of %d", i%17, g%3)
				if got, want := c.BlobHash(b), BlobHash(b); got != want {
					t.Errorf("BlobHash(%q) = %s, want %s", b, got, want)
				}
			}
		}()
	}
	wg.Wait()
}
