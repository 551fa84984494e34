package control

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// loadWorkers loads fsys with cluster files decoded on workers goroutines.
func loadWorkers(fsys fstest.MapFS, workers int, o Options) (*Repo, error) {
	l := newLoader(fsys, o)
	l.workers = workers
	return l.load()
}

// clusterFiles is the sorted cluster file names of fsys.
func clusterFiles(fsys fstest.MapFS) []string {
	var names []string
	for p := range fsys {
		if len(p) > len(clustersDir) && p[:len(clustersDir)+1] == clustersDir+"/" {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	return names
}

// TestClusterFilesDecodeAsOneAfterAnother: decoding cluster files on several goroutines gives
// the load of one goroutine: the same clusters in the same order, the same issues, the same
// first error (the file first in walk order), for every kind of bad file.
func TestClusterFilesDecodeAsOneAfterAnother(t *testing.T) {
	t.Parallel()
	good := fleetgen.Generate(fleetgen.Options{Clusters: 200, Apps: 6, Seed: 3})
	files := clusterFiles(good)
	bad := fstest.MapFS{}
	for p, f := range good {
		bad[p] = f
	}
	put := func(i int, s string) { bad[files[i]] = &fstest.MapFile{Data: []byte(s)} }
	put(3, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: x\n")                        // syntax
	put(40, "")                                                                                            // empty
	put(41, "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: w}\n")                    // misplaced kind
	put(77, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: y}\nspec: {wrkspace: a}\n") // unknown field
	put(120, string(good[files[121]].Data))                                                                // a duplicate name
	put(150, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: z}\n---\nkind: Cluster\n") // two documents

	for _, c := range []struct {
		name string
		fsys fstest.MapFS
	}{{"valid", good}, {"bad files", bad}} {
		t.Run(c.name, func(t *testing.T) {
			want, wantErr := loadWorkers(c.fsys, 1, Options{})
			for _, workers := range []int{2, 3, 8} {
				got, err := loadWorkers(c.fsys, workers, Options{})
				if wantErr != nil {
					require.Error(t, err)
					assert.Equal(t, wantErr.Error(), err.Error(), "%d workers", workers)
					continue
				}
				require.NoError(t, err)
				assert.Equal(t, want, got, "%d workers", workers)
			}
			if c.name == "bad files" {
				var is Issues
				require.True(t, errors.As(wantErr, &is), "%v", wantErr)
				for _, i := range []int{3, 40, 41, 77, 150} {
					assert.Contains(t, wantErr.Error(), files[i]+":", "every bad file is reported")
				}
			}
		})
	}

	// Past a bound the error names the first file in walk order, whichever goroutine decodes it.
	bombs := fstest.MapFS{}
	for p, f := range good {
		bombs[p] = f
	}
	bomb := "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: bomb}\nspec:\n  values:\n    x:\n" + indent(indent(aliasBomb))
	for _, i := range []int{190, 60, 61, 199} {
		bombs[files[i]] = &fstest.MapFile{Data: []byte(bomb)}
	}
	for _, workers := range []int{1, 2, 8} {
		repo, err := loadWorkers(bombs, workers, Options{})
		assert.Nil(t, repo)
		require.ErrorIs(t, err, ErrTooLarge)
		assert.Contains(t, err.Error(), files[60]+":", "%d workers", workers)
	}
	// A file past the size bound, which the walk refuses as it reads it: after the first bomb,
	// the bomb still names the error; before it, the large file does.
	huge := &fstest.MapFile{Data: []byte("# " + strings.Repeat("x", MaxFileBytes))}
	for _, c := range []struct{ at, want int }{{150, 60}, {10, 10}} {
		withHuge := fstest.MapFS{}
		for p, f := range bombs {
			withHuge[p] = f
		}
		withHuge[files[c.at]] = huge
		for _, workers := range []int{1, 2, 8} {
			_, err := loadWorkers(withHuge, workers, Options{})
			require.ErrorIs(t, err, ErrTooLarge)
			assert.Contains(t, err.Error(), files[c.want]+":", "large file at %d, %d workers", c.at, workers)
		}
	}
}

// TestParallelDecodeCachesOnlyGoodFiles: a cache filled by a parallel load holds the files that
// decoded without a problem, and the next load takes them from it.
func TestParallelDecodeCachesOnlyGoodFiles(t *testing.T) {
	t.Parallel()
	fsys := fleetgen.Generate(fleetgen.Options{Clusters: 50, Apps: 4, Seed: 5})
	files := clusterFiles(fsys)
	fsys[files[7]] = &fstest.MapFile{Data: []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: q}\nspec: {nope: 1}\n")}
	cache := NewCache(0)
	_, err := loadWorkers(fsys, 4, Options{Cache: cache})
	require.Error(t, err)
	for i, f := range files {
		cached := cache.cluster(f, fsys[f].Data) != nil
		assert.Equal(t, i != 7, cached, "%s", f)
	}
}

// openRecorder is a MapFS that records the files opened.
type openRecorder struct {
	fstest.MapFS
	opened []string
}

func (r *openRecorder) Open(name string) (fs.File, error) {
	r.opened = append(r.opened, name)
	return r.MapFS.Open(name)
}

// TestCatalogHookSeesTheAppsFirst: Options.Catalog gets the catalog's apps once, before a
// cluster file is read, and the load is the same as without it.
func TestCatalogHookSeesTheAppsFirst(t *testing.T) {
	t.Parallel()
	fsys := fleetgen.Generate(fleetgen.Options{Clusters: 20, Apps: 5, Seed: 9})
	var calls int
	var names []string
	rec := &openRecorder{MapFS: fsys}
	repo, err := LoadWith(rec, Options{Catalog: func(apps []*App) {
		calls++
		for _, name := range rec.opened {
			assert.NotContains(t, name, clustersDir+"/", "a cluster file was read before the catalog hook")
		}
		for _, a := range apps {
			names = append(names, a.Metadata.Name)
			assert.NotEmpty(t, a.Files, "app %s comes with its files", a.Metadata.Name)
		}
	}})
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	var loaded []string
	for _, a := range repo.Apps {
		loaded = append(loaded, a.Metadata.Name)
	}
	slices.Sort(names)
	assert.Equal(t, loaded, names, "every app of the repo")
	plain, err := Load(fsys)
	require.NoError(t, err)
	assert.Equal(t, plain, repo)

	// An invalid repo still shows its apps first; the load then fails.
	fsys["clusters/broken.yaml"] = &fstest.MapFile{Data: []byte("kind: [")}
	calls = 0
	_, err = LoadWith(fsys, Options{Catalog: func([]*App) { calls++ }})
	require.Error(t, err)
	assert.Equal(t, 1, calls, fmt.Sprint(err))
}
