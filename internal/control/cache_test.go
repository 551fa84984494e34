package control

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exampleFS is the example control repo in memory.
func exampleFS(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := os.DirFS(filepath.Join("..", "..", "testdata", "control"))
	require.NoError(t, fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	}))
	return m
}

func clusterNamed(r *Repo, name string) *Cluster {
	for _, c := range r.Clusters {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// TestLoadCachedIsLoad: a load through the cache returns what Load returns, commit after
// commit; a cluster file that did not change is not decoded again (its Cluster is the one the
// last load returned), one that changed is.
func TestLoadCachedIsLoad(t *testing.T) {
	t.Parallel()
	files := exampleFS(t)
	cache := NewCache(0)
	first, err := LoadCached(files, cache)
	require.NoError(t, err)
	want, err := Load(files)
	require.NoError(t, err)
	assert.Equal(t, want, first)

	second, err := LoadCached(files, cache)
	require.NoError(t, err)
	assert.Equal(t, want, second)
	for i := range first.Clusters {
		assert.Same(t, first.Clusters[i], second.Clusters[i], "%s: decoded once", first.Clusters[i].Metadata.Name)
	}

	// The next commit changes one cluster's value.
	next := fstest.MapFS{}
	for p, f := range files {
		next[p] = f
	}
	edited := strings.Replace(string(files["clusters/edge-1.yaml"].Data), "192.168.50.0/28", "192.168.60.0/28", 1)
	next["clusters/edge-1.yaml"] = &fstest.MapFile{Data: []byte(edited)}
	third, err := LoadCached(next, cache)
	require.NoError(t, err)
	want, err = Load(next)
	require.NoError(t, err)
	assert.Equal(t, want, third)
	assert.Equal(t, "192.168.60.0/28", clusterNamed(third, "edge-1").Spec.Values["metallb_range"])
	assert.NotSame(t, clusterNamed(first, "edge-1"), clusterNamed(third, "edge-1"))
	assert.Same(t, clusterNamed(first, "prod-eu-1"), clusterNamed(third, "prod-eu-1"))
	assert.Equal(t, "192.168.50.0/28", clusterNamed(first, "edge-1").Spec.Values["metallb_range"], "the first load's repo is untouched")
}

// TestLoadCachedReportsEveryProblem: a cluster file with a problem is never kept: every load
// reports it, with the same position; the same content under another name is another file.
func TestLoadCachedReportsEveryProblem(t *testing.T) {
	t.Parallel()
	files := exampleFS(t)
	bad := string(files["clusters/edge-1.yaml"].Data) + "  colour: blue\n"
	files["clusters/edge-1.yaml"] = &fstest.MapFile{Data: []byte(bad)}
	cache := NewCache(0)
	_, want := Load(files)
	require.Error(t, want)
	for range 2 {
		_, err := LoadCached(files, cache)
		assert.Equal(t, want, err)
	}

	// A valid file, cached, copied under another name: the copy is another file (its problems
	// name it), and the repo validates as a whole: two files now define prod-eu-1.
	files = exampleFS(t)
	_, err := LoadCached(files, cache)
	require.NoError(t, err)
	files["clusters/copy.yaml"] = files["clusters/prod-eu-1.yaml"]
	_, err = LoadCached(files, cache)
	require.Error(t, err)
	_, want = Load(files)
	assert.Equal(t, want, err)
	assert.Contains(t, err.Error(), "clusters/copy.yaml")
}

// TestCacheConcurrentLoads: loads of several commits at once share one cache (run with -race).
func TestCacheConcurrentLoads(t *testing.T) {
	t.Parallel()
	files := exampleFS(t)
	want, err := Load(files)
	require.NoError(t, err)
	cache := NewCache(4 << 10) // small: generations turn over during the loads
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				got, err := LoadCached(files, cache)
				if assert.NoError(t, err) {
					assert.Equal(t, want, got)
				}
			}
		}()
	}
	wg.Wait()
}
