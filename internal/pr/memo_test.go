package pr

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
)

// TestDesiredTreeRememberedRightly: a rendered target remembers its desired tree per default
// branch tree in its renderer's hash cache; whatever changes (the default branch, a file of
// the target, a target of the next render), the decision's tree is the tree computed afresh,
// and an in-sync repo lists no file.
func TestDesiredTreeRememberedRightly(t *testing.T) {
	t.Parallel()
	repo, err := control.LoadDir(filepath.Join("..", "..", "testdata", "control"))
	require.NoError(t, err)
	r := fanout.NewRenderer(fanout.Options{})
	first, err := r.Render(repo)
	require.NoError(t, err)
	second, err := r.Render(repo) // the next render: new targets, the same cache
	require.NoError(t, err)
	require.NotNil(t, first[0].Hasher())

	fresh := func(base gittree.Listing, tg *fanout.Target) string {
		l := gittree.Listing{}
		for p, e := range base {
			if !tg.Kind.Managed(p) {
				l[p] = e
			}
		}
		for p, c := range tg.Files {
			l[p] = gittree.Entry{Mode: gittree.ModeFile, Hash: gittree.BlobHash(c)}
		}
		for p, c := range tg.Scaffolds {
			if _, ok := base[p]; !ok {
				l[p] = gittree.Entry{Mode: gittree.ModeFile, Hash: gittree.BlobHash(c)}
			}
		}
		return hashOf(t, l)
	}
	decide := func(base gittree.Listing, tg *fanout.Target) *Decision {
		s := &Snapshot{Exists: true, Base: &Commit{SHA: baseSHA, Tree: hashOf(t, base)}, Files: base}
		d, err := Decide(s, tg, Options{})
		require.NoError(t, err)
		assert.Equal(t, fresh(base, tg), d.Tree, "%s", tg.Repo)
		return d
	}
	for i, tg := range first {
		empty := listingOf(map[string]string{"apps/kustomization.yaml": "resources: []\n"})
		decide(empty, tg)
		decide(empty, tg) // remembered
		other := listingOf(map[string]string{"apps/kustomization.yaml": "resources: [x.yaml]\n", "apps/x.yaml": "kind: A\n"})
		decide(other, tg)
		decide(empty, second[i])

		// The repo in sync: the same tree, nothing to list.
		synced := gittree.Listing{}
		for p, c := range tg.Files {
			synced[p] = gittree.Entry{Mode: gittree.ModeFile, Hash: gittree.BlobHash(c)}
		}
		for p, c := range tg.Scaffolds {
			synced[p] = gittree.Entry{Mode: gittree.ModeFile, Hash: gittree.BlobHash(c)}
		}
		d := decide(synced, tg)
		assert.Equal(t, ActionNoop, d.Action, "%s", tg.Repo)
		assert.Empty(t, d.Files)

		// A file of the target changes (a copy of it, with the same cache): another tree.
		changed := tg.Clone()
		for p, c := range changed.Files {
			changed.Files[p] = append(append([]byte(nil), c...), "# changed\n"...)
			break
		}
		d = decide(synced, changed)
		assert.NotEqual(t, ActionNoop, d.Action, "%s", tg.Repo)
		assert.Len(t, d.Files, 1)
	}
}
