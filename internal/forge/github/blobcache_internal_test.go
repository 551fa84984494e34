package github

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBlobCacheIsBounded: beyond blobCacheBytes the oldest blobs go first; a blob over an
// eighth of the bound is never kept.
func TestBlobCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c blobCache
	chunk := bytes.Repeat([]byte("x"), blobCacheBytes/8)
	for i := range 9 {
		c.put(fmt.Sprint(i), chunk)
	}
	assert.LessOrEqual(t, c.size, blobCacheBytes)
	_, ok := c.get("0")
	assert.False(t, ok, "the oldest was forgotten")
	_, ok = c.get("8")
	assert.True(t, ok, "the newest is kept")
	c.put("big", bytes.Repeat([]byte("x"), blobCacheBytes/8+1))
	_, ok = c.get("big")
	assert.False(t, ok)
}
