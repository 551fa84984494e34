package fanout

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
)

func TestChanged(t *testing.T) {
	t.Parallel()
	gen := fleetgen.Generate(fleetgen.Options{Clusters: 40, Workspaces: 2, Apps: 8, Seed: 3})
	r := NewRenderer(Options{})
	render := func(fs fstest.MapFS) []*Target {
		repo, err := control.Load(fs)
		require.NoError(t, err)
		return mustRender(t, r, repo)
	}
	base := render(gen)

	changed, removed := Changed(base, render(gen))
	assert.Empty(t, changed, "the same control repo changes nothing")
	assert.Empty(t, removed)

	// One cluster's value: only its repo.
	one := clone(gen)
	var file, cluster string
	for p, f := range one {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), "_range: ") {
			file, cluster = p, strings.TrimSuffix(strings.TrimPrefix(p, "clusters/"), ".yaml")
			break
		}
	}
	require.NotEmpty(t, file, "a generated cluster with a range value")
	one[file] = &fstest.MapFile{Data: []byte(strings.Replace(string(one[file].Data), ".0/24", ".0/25", 1))}
	changed, removed = Changed(base, render(one))
	assert.Equal(t, []string{"cluster-" + cluster}, changed)
	assert.Empty(t, removed)

	// A platform component on every cluster: every cluster repo, no workspace repo.
	comp := clone(gen)
	comp["catalog/monitoring/app.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(comp["catalog/monitoring/app.yaml"].Data), "v1.0.0", "v1.1.0", 1))}
	changed, _ = Changed(base, render(comp))
	assert.Len(t, changed, 40)
	for _, c := range changed {
		assert.True(t, strings.HasPrefix(c, "cluster-"), c)
	}

	// A removed cluster is listed apart; its workspace repo changes too.
	gone := clone(gen)
	delete(gone, file)
	changed, removed = Changed(base, render(gone))
	assert.Equal(t, []string{"cluster-" + cluster}, removed)
	for _, c := range changed {
		assert.True(t, strings.HasPrefix(c, "workspace-"), "only the cluster's workspace repo changes: %s", c)
	}
}

func clone(fs fstest.MapFS) fstest.MapFS {
	out := make(fstest.MapFS, len(fs))
	for p, f := range fs {
		out[p] = f
	}
	return out
}

// TestDigestAgreesWithChanged: a target's digest changes exactly when Changed lists it.
func TestDigestAgreesWithChanged(t *testing.T) {
	t.Parallel()
	gen := fleetgen.Generate(fleetgen.Options{Clusters: 40, Workspaces: 2, Apps: 8, Seed: 3})
	r := NewRenderer(Options{})
	render := func(fs fstest.MapFS) []*Target {
		repo, err := control.Load(fs)
		require.NoError(t, err)
		return mustRender(t, r, repo)
	}
	base := render(gen)
	digests := map[string]string{}
	for _, tg := range base {
		digests[tg.Repo] = Digest(tg)
		assert.Equal(t, digests[tg.Repo], Digest(tg), "%s: the digest is deterministic", tg.Repo)
		require.NotNil(t, tg.hasher)
		uncached := tg.Clone()
		uncached.hasher = nil
		assert.Equal(t, digests[tg.Repo], Digest(uncached), "%s: the renderer's hash cache changes no digest", tg.Repo)
	}
	edited := clone(gen)
	for p, f := range edited {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), "_range: ") {
			edited[p] = &fstest.MapFile{Data: []byte(strings.Replace(string(f.Data), ".0/24", ".0/25", 1))}
			break
		}
	}
	next := render(edited)
	changed, _ := Changed(base, next)
	require.Len(t, changed, 1)
	for _, tg := range next {
		assert.Equal(t, slices.Contains(changed, tg.Repo), Digest(tg) != digests[tg.Repo], "%s", tg.Repo)
	}
	// Every field counts, not only files.
	one := next[0]
	for name, mutate := range map[string]func(*Target){
		"reviewers":  func(x *Target) { x.Reviewers = append(slices.Clone(x.Reviewers), "someone") },
		"visibility": func(x *Target) { x.Visibility = "public" },
		"removed":    func(x *Target) { x.Removed = !x.Removed },
		"auto-merge": func(x *Target) { x.Access.AllowAutoMerge = !x.Access.AllowAutoMerge },
		"scaffold":   func(x *Target) { x.Scaffolds = map[string][]byte{"a": []byte("b")} },
		"file moved": func(x *Target) { x.Files = map[string][]byte{"ab": nil} },
	} {
		c := one.Clone()
		mutate(c)
		assert.NotEqual(t, Digest(one), Digest(c), name)
	}
	a, b := one.Clone(), one.Clone()
	a.Files, b.Files = map[string][]byte{"ab": []byte("c")}, map[string][]byte{"a": []byte("bc")}
	assert.NotEqual(t, Digest(a), Digest(b), "path and content boundaries are kept apart")
}

// TestTargetHashesFollowItsFiles: BlobHashes and ContentKey answer for the files as they are:
// a file replaced, added or removed is hashed (and named) afresh; two targets with the same
// content have the same key, and a file moved between Files and Scaffolds changes it.
func TestTargetHashesFollowItsFiles(t *testing.T) {
	t.Parallel()
	a := &Target{Kind: KindCluster, Files: map[string][]byte{"README.md": []byte("a\n"), "platform/x.yaml": []byte("kind: X\n")},
		Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")}}
	b := a.Clone()
	assert.Equal(t, a.ContentKey(), b.ContentKey())
	assert.Equal(t, gittree.BlobHash([]byte("kind: X\n")), a.BlobHashes()["platform/x.yaml"])

	key := a.ContentKey()
	a.Files["platform/x.yaml"] = []byte("kind: Y\n")
	assert.Equal(t, gittree.BlobHash([]byte("kind: Y\n")), a.BlobHashes()["platform/x.yaml"], "a replaced file is hashed again")
	assert.NotEqual(t, key, a.ContentKey())
	a.Files["platform/y.yaml"] = []byte("kind: Z\n")
	assert.Len(t, a.BlobHashes(), 4, "an added file")
	delete(a.Files, "platform/y.yaml")
	delete(a.Files, "platform/x.yaml")
	assert.Len(t, a.BlobHashes(), 2, "removed files")

	c := b.Clone()
	c.Scaffolds["README.md"], c.Files = c.Files["README.md"], map[string][]byte{"platform/x.yaml": c.Files["platform/x.yaml"]}
	assert.NotEqual(t, b.ContentKey(), c.ContentKey(), "a file is not a scaffold")
}
