package pr

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
)

func target() *fanout.Target {
	return &fanout.Target{
		Kind: fanout.KindCluster, Name: "a", Owner: "acme", Repo: "cluster-a", DefaultBranch: "main",
		Files: map[string][]byte{
			"README.md":          []byte("readme\n"),
			".github/CODEOWNERS": []byte("* @acme/platform\n"),
			"flux/fleetbot.yaml": []byte("kind: Kustomization\n"),
			"platform/m.yaml":    []byte("kind: ConfigMap\n"),
		},
		Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")},
		Reviewers: []string{"platform"},
	}
}

func listingOf(files map[string]string) gittree.Listing {
	l := gittree.Listing{}
	for p, c := range files {
		l[p] = gittree.Entry{Mode: gittree.ModeFile, Hash: gittree.BlobHash([]byte(c))}
	}
	return l
}

func hashOf(t *testing.T, l gittree.Listing) string {
	h, err := gittree.Hash(l)
	require.NoError(t, err)
	return h
}

// synced is the default branch content equal to target().
func synced() map[string]string {
	return map[string]string{
		"README.md": "readme\n", ".github/CODEOWNERS": "* @acme/platform\n", "flux/fleetbot.yaml": "kind: Kustomization\n",
		"platform/m.yaml": "kind: ConfigMap\n", "apps/kustomization.yaml": "resources: []\n",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

const (
	baseSHA  = "1111111111111111111111111111111111111111"
	base2SHA = "2222222222222222222222222222222222222222"
	botSHA   = "3333333333333333333333333333333333333333"
	humanSHA = "4444444444444444444444444444444444444444"
)

func snapshot(t *testing.T, files map[string]string) *Snapshot {
	l := listingOf(files)
	return &Snapshot{Exists: true, Base: &Commit{SHA: baseSHA, Tree: hashOf(t, l)}, Files: l}
}

func syncedTree(t *testing.T) string {
	return hashOf(t, listingOf(synced()))
}

func openPR(m marker) *PullRequest {
	return &PullRequest{Number: 7, State: StateOpen, Head: "fleetbot/sync", Base: "main", Body: "text\n" + m.String()}
}

func TestDecide(t *testing.T) {
	stale := with(synced(), "platform/m.yaml", "kind: Old\n")
	type want struct {
		action Action
		steps  []string
		files  map[string]string
		reason string
	}
	cases := []struct {
		name   string
		snap   func(t *testing.T) *Snapshot
		target func() *fanout.Target
		want   want
	}{
		{
			name: "new repo: create, bootstrap, first PR",
			snap: func(t *testing.T) *Snapshot { return &Snapshot{} },
			want: want{action: ActionCreate, steps: []string{"createRepo", "bootstrap", "push", "openPR"},
				files: map[string]string{"README.md": FileAdded, ".github/CODEOWNERS": FileAdded, "flux/fleetbot.yaml": FileAdded, "platform/m.yaml": FileAdded, "apps/kustomization.yaml": FileAdded}},
		},
		{
			name: "removed target without repo: nothing",
			snap: func(t *testing.T) *Snapshot { return &Snapshot{} },
			target: func() *fanout.Target {
				return fanout.Tombstone("acme", []string{"platform"}, "main", fanout.KindCluster, "a", "cluster-a")
			},
			want: want{action: ActionNoop},
		},
		{
			name: "empty repo: bootstrap without creating",
			snap: func(t *testing.T) *Snapshot { return &Snapshot{Exists: true, Empty: true} },
			want: want{action: ActionCreate, steps: []string{"bootstrap", "push", "openPR"},
				files: map[string]string{"README.md": FileAdded, ".github/CODEOWNERS": FileAdded, "flux/fleetbot.yaml": FileAdded, "platform/m.yaml": FileAdded, "apps/kustomization.yaml": FileAdded}},
		},
		{
			name: "in sync: noop, zero writes",
			snap: func(t *testing.T) *Snapshot { return snapshot(t, synced()) },
			want: want{action: ActionNoop},
		},
		{
			name: "hand-edited scaffold and human files are not touched",
			snap: func(t *testing.T) *Snapshot {
				return snapshot(t, with(synced(), "apps/kustomization.yaml", "resources: [x.yaml]\n", "apps/x.yaml", "kind: X\n", "notes.txt", "hi"))
			},
			want: want{action: ActionNoop},
		},
		{
			name: "changed and stale managed files: open",
			snap: func(t *testing.T) *Snapshot {
				return snapshot(t, with(stale, "platform/gone.yaml", "kind: Gone\n", "apps/kustomization.yaml", ""))
			},
			want: want{action: ActionOpen, steps: []string{"push", "openPR"},
				files: map[string]string{"platform/m.yaml": FileChanged, "platform/gone.yaml": FileRemoved, "apps/kustomization.yaml": FileAdded}},
		},
		{
			name: "open PR already carries the desired tree: noop",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: botSHA, Tree: syncedTree(t), Parents: []string{baseSHA}}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionNoop, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "desired state changed: update in place",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: botSHA, Tree: gittree.EmptyTree, Parents: []string{baseSHA}}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionUpdate, steps: []string{"push", "updatePR"}, reason: "desired state changed",
				files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "base moved: rebuild",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: botSHA, Tree: syncedTree(t), Parents: []string{base2SHA}}
				s.PR = openPR(marker{Head: botSHA, Base: base2SHA})
				return s
			},
			want: want{action: ActionUpdate, steps: []string{"push", "updatePR"}, reason: "moved",
				files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "human commit on the bot branch: blocked, said once",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: humanSHA, Tree: gittree.EmptyTree, Parents: []string{botSHA}, Message: "fix\n"}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionBlocked, steps: []string{"block"}, reason: "4444444",
				files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "already blocked: no writes",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: humanSHA, Tree: gittree.EmptyTree, Parents: []string{botSHA}}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA, Blocked: true})
				return s
			},
			want: want{action: ActionBlocked, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "a human commit even when main already matches: still blocked, branch kept",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, synced())
				s.Bot = &Commit{SHA: humanSHA, Tree: gittree.EmptyTree, Parents: []string{botSHA}}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionBlocked, steps: []string{"block"}},
		},
		{
			name: "reverted: close and delete branch",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, synced())
				s.Bot = &Commit{SHA: botSHA, Tree: gittree.EmptyTree, Parents: []string{baseSHA}}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionClose, steps: []string{"closePR", "deleteBranch"}},
		},
		{
			name: "bot branch deleted under an open PR: rebuilt",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionUpdate, steps: []string{"push", "updatePR"}, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			// Whoever GitHub says committed it (web-flow for an App, unsigned with a token or
			// on GHES): its tree is the one its trailer names.
			name: "interrupted run: bot commit not yet in the marker is still ours",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: botSHA, Tree: syncedTree(t), Parents: []string{baseSHA},
					Message: "fleetbot: sync from abc\n\nFleetbot-Source: abc\nFleetbot-Tree: " + syncedTree(t) + "\n"}
				s.PR = openPR(marker{Head: humanSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionUpdate, steps: []string{"updatePR"}, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "a fleetbot commit amended by hand: its tree no longer matches its trailer",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: humanSHA, Tree: gittree.EmptyTree, Parents: []string{baseSHA},
					Message: "fleetbot: sync from abc\n\nFleetbot-Source: abc\nFleetbot-Tree: " + syncedTree(t) + "\n"}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionBlocked, steps: []string{"block"}, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "a commit with fleetbot's source trailer but no tree trailer is not ours",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.Bot = &Commit{SHA: humanSHA, Tree: syncedTree(t), Parents: []string{baseSHA},
					Message: "fleetbot: sync from abc\n\nFleetbot-Source: abc\n"}
				s.PR = openPR(marker{Head: botSHA, Base: baseSHA})
				return s
			},
			want: want{action: ActionBlocked, steps: []string{"block"}, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "merged by hand: record it and delete the merged branch",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, synced())
				s.Bot = &Commit{SHA: botSHA, Tree: syncedTree(t), Parents: []string{baseSHA}}
				s.PR = &PullRequest{Number: 7, State: StateMerged, Inferred: true, HeadSHA: botSHA, Head: "fleetbot/sync", Base: "main"}
				return s
			},
			want: want{action: ActionCleanup, steps: []string{"recordMerged", "deleteBranch"}},
		},
		{
			name: "after a merge, the next change opens a fresh PR",
			snap: func(t *testing.T) *Snapshot {
				s := snapshot(t, stale)
				s.PR = &PullRequest{Number: 7, State: StateMerged, HeadSHA: botSHA, Head: "fleetbot/sync", Base: "main"}
				return s
			},
			want: want{action: ActionOpen, steps: []string{"push", "openPR"}, files: map[string]string{"platform/m.yaml": FileChanged}},
		},
		{
			name: "removed target: a PR removing the managed content",
			snap: func(t *testing.T) *Snapshot { return snapshot(t, with(synced(), "apps/x.yaml", "kind: X\n")) },
			target: func() *fanout.Target {
				return fanout.Tombstone("acme", []string{"platform"}, "main", fanout.KindCluster, "a", "cluster-a")
			},
			want: want{action: ActionRemove, steps: []string{"push", "openPR"}, files: map[string]string{
				"README.md": FileChanged, "flux/fleetbot.yaml": FileRemoved, "platform/m.yaml": FileRemoved}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := target()
			if tc.target != nil {
				tg = tc.target()
			}
			d, err := Decide(tc.snap(t), tg, Options{Source: "abc"})
			require.NoError(t, err)
			assert.Equal(t, tc.want.action, d.Action, d.Reason)
			assert.Equal(t, tc.want.steps, steps(d), d.Reason)
			files := map[string]string{}
			for _, f := range d.Files {
				files[f.Path] = f.Op
			}
			if tg.Removed {
				// The tombstone's CODEOWNERS wording belongs to fanout.
				delete(files, ".github/CODEOWNERS")
			}
			if tc.want.files == nil {
				tc.want.files = map[string]string{}
			}
			assert.Equal(t, tc.want.files, files)
			assert.Contains(t, d.Reason, tc.want.reason)
			assert.Equal(t, len(tc.want.steps) > 0, d.Writes())
		})
	}
}

func steps(d *Decision) []string {
	var s []string
	add := func(ok bool, name string) {
		if ok {
			s = append(s, name)
		}
	}
	add(d.CreateRepo, "createRepo")
	add(len(d.Bootstrap) > 0, "bootstrap")
	add(d.PushBranch, "push")
	add(d.OpenPR, "openPR")
	add(d.UpdatePR, "updatePR")
	add(d.Block, "block")
	add(d.ClosePR, "closePR")
	add(d.RecordMerged, "recordMerged")
	add(d.DeleteBranch, "deleteBranch")
	return s
}

func TestDecideBootstrapHoldsOnlyReadmeCodeownersScaffolds(t *testing.T) {
	d, err := Decide(&Snapshot{}, target(), Options{})
	require.NoError(t, err)
	var paths []string
	for _, c := range d.Bootstrap {
		paths = append(paths, c.Path)
	}
	assert.Equal(t, []string{".github/CODEOWNERS", "README.md", "apps/kustomization.yaml"}, paths)
	paths = nil
	for _, c := range d.Changes {
		paths = append(paths, c.Path)
	}
	assert.Equal(t, []string{"flux/fleetbot.yaml", "platform/m.yaml"}, paths, "rendered manifests arrive through the PR")
	assert.Equal(t, syncedTree(t), d.Tree)
}

func TestDecideErrors(t *testing.T) {
	_, err := Decide(&Snapshot{Exists: true}, target(), Options{})
	assert.ErrorIs(t, err, ErrDefaultBranchMissing, "branches exist but not main")
	assert.Contains(t, err.Error(), "acme/cluster-a")

	tg := target()
	tg.Files["apps/mine.yaml"] = []byte("x")
	_, err = Decide(snapshot(t, synced()), tg, Options{})
	assert.ErrorContains(t, err, "not a path fleetbot manages")

	// A human file "apps" where a scaffold needs a directory.
	_, err = Decide(snapshot(t, with(synced(), "apps/kustomization.yaml", "", "apps", "x")), target(), Options{})
	assert.ErrorContains(t, err, "path conflict")
}

func TestMarkerRoundTrip(t *testing.T) {
	m := marker{Head: botSHA, Base: baseSHA, Tree: gittree.EmptyTree, Source: "abc"}
	body := "hello\n\n" + m.String() + "\n"
	got, ok := parseMarker(body)
	require.True(t, ok)
	assert.Equal(t, m, got)
	m.Blocked = true
	body = withMarker(body, m)
	got, ok = parseMarker(body)
	require.True(t, ok)
	assert.True(t, got.Blocked)
	assert.Equal(t, 1, countMarkers(body))
	_, ok = parseMarker("no marker")
	assert.False(t, ok)
}

func countMarkers(s string) int { return len(markerRE.FindAllStringIndex(s, -1)) }

// markerRE is the marker's definition as a regular expression: findMarker must find what it
// finds (FuzzMarker).
var markerRE = regexp.MustCompile(`<!-- fleetbot:state (\{[^\n]*?\}) -->`)

func TestDiffObjects(t *testing.T) {
	files := []FileChange{
		{Path: "a.yaml", Op: FileChanged}, {Path: "b.yaml", Op: FileRemoved}, {Path: "c.yaml", Op: FileAdded},
		{Path: "kustomization.yaml", Op: FileAdded}, {Path: "README.md", Op: FileChanged},
	}
	old := map[string][]byte{
		"a.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: n}\ndata: {k: '1'}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: n}\n"),
		"b.yaml": []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: n}\n"),
	}
	cur := map[string][]byte{
		"a.yaml":             []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: n}\ndata: {k: '2'}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: same, namespace: n}\n"),
		"c.yaml":             []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n"),
		"kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [c.yaml]\n"),
	}
	sum := SummarizeObjects(DiffObjects(files, old, cur))
	assert.Equal(t, map[string]ObjectCounts{
		"ConfigMap": {Changed: 1}, "Secret": {Removed: 1}, "Namespace": {Added: 1},
	}, sum)
}
