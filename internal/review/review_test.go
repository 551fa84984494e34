package review

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// example is the example control repo as an in-memory tree.
func example(t *testing.T) fstest.MapFS {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "control")
	m := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(dir), p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	}))
	return m
}

// change returns head: base with one replacement in one file.
func change(t *testing.T, base fstest.MapFS, file, old, new string) fstest.MapFS {
	t.Helper()
	head := fstest.MapFS{}
	for p, f := range base {
		head[p] = f
	}
	data := string(base[file].Data)
	require.Contains(t, data, old, file)
	head[file] = &fstest.MapFile{Data: []byte(strings.Replace(data, old, new, 1))}
	return head
}

func memberOf(teams ...string) func(string) (bool, error) {
	return func(slug string) (bool, error) {
		for _, t := range teams {
			if t == slug {
				return true, nil
			}
		}
		return false, nil
	}
}

func review(t *testing.T, base, head fs.FS, author string, member func(string) (bool, error)) *Report {
	t.Helper()
	rep, err := Review(Input{Base: base, Head: head, BaseRev: "base", HeadRev: "head", Author: author, Member: member}, fanout.NewRenderer(fanout.Options{}))
	require.NoError(t, err)
	return rep
}

func TestPlatformAdminEditsPlatform(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "platform.yaml", "interval: 10m", "interval: 5m")
	rep := review(t, base, head, "alice", memberOf("platform"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	require.Len(t, rep.Files, 1)
	assert.True(t, rep.Files[0].Allowed)
	assert.Equal(t, "the author is a platform admin (team platform)", rep.Files[0].Reason)
	assert.Equal(t, []string{"platform"}, rep.AuthorTeams)
	assert.Len(t, rep.Targets, 4, "the interval is in every cluster repo's flux/fleetbot.yaml")
	for _, tc := range rep.Targets {
		assert.Equal(t, []string{"~flux/fleetbot.yaml"}, tc.Files, tc.Repo)
	}
}

func TestWorkspaceAdminEditsCluster(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "clusters/prod-eu-1.yaml", "monitoring_retention: 30d", "monitoring_retention: 90d")
	rep := review(t, base, head, "bob", memberOf("payments-devs"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict)
	require.Len(t, rep.Files, 1)
	f := rep.Files[0]
	assert.False(t, f.Allowed)
	assert.Equal(t, "platform admin", f.Owner)
	assert.Contains(t, f.Reason, "only platform admins may change a cluster definition")
	assert.Contains(t, rep.Reasons[0], "clusters/prod-eu-1.yaml: only platform admins")
	require.Len(t, rep.Targets, 1)
	assert.Equal(t, "acme/cluster-prod-eu-1", rep.Targets[0].Repo)
	assert.Equal(t, []string{"cluster admins of prod-eu-1 (payments-sre)", "workspace admins of payments (payments-devs)"}, rep.Personas)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), "author's teams: none of the teams this change needs",
		"the teams were given: known, not unknown")
	assert.NotContains(t, text.String(), "(unknown)")
	assert.True(t, strings.HasSuffix(text.String(), "\nverdict NEEDS PLATFORM ADMIN REVIEW: 1 control repo file changed (1 the author may not change alone), 1 target repo reached\n"),
		"the summary line ends the text: %s", text.String())
}

func TestClusterAdminEditsOwnCluster(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "clusters/prod-eu-1.yaml", "monitoring_retention: 30d", "monitoring_retention: 90d")
	rep := review(t, base, head, "carol", memberOf("payments-sre"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict, "cluster admins may not change their own cluster definition")
}

func TestWorkspaceAdminEditsOwnApps(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "workspaces/payments.yaml", `podinfo_replicas: "2"`, `podinfo_replicas: "4"`)
	rep := review(t, base, head, "bob", memberOf("payments-devs"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	f := rep.Files[0]
	assert.True(t, f.Allowed)
	assert.Equal(t, "workspace admins of payments", f.Owner)
	assert.Equal(t, "workspace admins of payments (team payments-devs) may change its spec.apps", f.Reason)
	require.Len(t, rep.Targets, 1)
	assert.Equal(t, "acme/workspace-payments", rep.Targets[0].Repo)
	assert.Equal(t, []string{"~clusters/prod-eu-1/fleetbot/podinfo.yaml"}, rep.Targets[0].Files,
		"prod-us-1 overrides podinfo_replicas itself")

	var text, mdown, js strings.Builder
	require.NoError(t, rep.WriteText(&text))
	require.NoError(t, rep.WriteMarkdown(&mdown))
	require.NoError(t, rep.WriteJSON(&js))
	assert.Contains(t, text.String(), "verdict: ALLOWED")
	assert.Contains(t, mdown.String(), "✅ allowed")
	assert.Contains(t, js.String(), `"verdict": "allowed"`)
}

func TestWorkspaceAdminOverreaches(t *testing.T) {
	t.Parallel()
	base := example(t)
	for _, tc := range []struct {
		name, file, old, new, reason string
	}{
		{"another workspace's apps", "workspaces/search.yaml", "- app: podinfo", "- app: redis", "workspace admins of search (search-devs)"},
		{"adds itself to admins", "workspaces/search.yaml", "admins: [search-devs]", "admins: [search-devs, payments-devs]", "this change touches spec.admins"},
		{"own namespace", "workspaces/payments.yaml", "namespace: payments", "namespace: kube-system", "this change touches spec.namespace"},
		{"own admins", "workspaces/payments.yaml", "admins: [payments-devs]", "admins: [payments-devs, x]", "this change touches spec.admins"},
		{"own Pod Security level", "workspaces/payments.yaml", "admins: [payments-devs]", "admins: [payments-devs]\n  podSecurity: baseline", "this change touches spec.podSecurity (the Pod Security level of its namespace)"},
		{"the catalog", "catalog/podinfo/app.yaml", "scope: namespaced", "scope: namespaced\n", "app catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := review(t, base, change(t, base, tc.file, tc.old, tc.new), "bob", memberOf("payments-devs"))
			require.NotEqual(t, Allowed, rep.Verdict, "%+v", rep.Files)
			if rep.Verdict == Invalid {
				return
			}
			assert.Contains(t, strings.Join(rep.Reasons, "\n"), tc.reason)
		})
	}
}

func TestInvalidHead(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "clusters/prod-eu-1.yaml", "admins: [payments-sre]", "admins: [Payments SRE]")
	rep := review(t, base, head, "alice", memberOf("platform"))
	assert.Equal(t, Invalid, rep.Verdict)
	require.NotEmpty(t, rep.Issues)
	assert.Equal(t, "clusters/prod-eu-1.yaml:8", rep.Issues[0].Pos.String())
	assert.Empty(t, rep.Targets, "no plan from an invalid head")
}

func TestUnknownMembership(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "workspaces/payments.yaml", `podinfo_replicas: "2"`, `podinfo_replicas: "4"`)
	rep := review(t, base, head, "bob", nil)
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict)
	assert.True(t, rep.MembershipUnknown)
}

// TestRetargetedLinkIsAChange: control.Load reads a symlink inside the repo as its target, so
// pointing a cluster's link at another file is a change of that cluster's file, judged by who
// may change it, even though no file's content changed.
func TestRetargetedLinkIsAChange(t *testing.T) {
	t.Parallel()
	base := example(t)
	orig := base["clusters/prod-eu-1.yaml"].Data
	base["shared/prod-eu-1.yaml"] = &fstest.MapFile{Data: orig}
	base["shared/prod-eu-1-long.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(orig), "monitoring_retention: 30d", "monitoring_retention: 90d", 1))}
	base["clusters/prod-eu-1.yaml"] = &fstest.MapFile{Data: []byte("../shared/prod-eu-1.yaml"), Mode: fs.ModeSymlink | 0o777}
	head := fstest.MapFS{}
	for p, f := range base {
		head[p] = f
	}
	head["clusters/prod-eu-1.yaml"] = &fstest.MapFile{Data: []byte("../shared/prod-eu-1-long.yaml"), Mode: fs.ModeSymlink | 0o777}

	rep := review(t, base, head, "bob", memberOf("payments-devs"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict)
	require.Len(t, rep.Files, 1)
	assert.Equal(t, "clusters/prod-eu-1.yaml", rep.Files[0].Path)
	assert.False(t, rep.Files[0].Allowed)
}

// countingRenderer counts renders.
type countingRenderer struct {
	r *fanout.Renderer
	n int
}

func (c *countingRenderer) Render(repo *control.Repo) ([]*fanout.Target, error) {
	c.n++
	return c.r.Render(repo)
}

// TestReviewOfLoadedSides: a caller that already loaded and rendered both sides (serve keeps
// the commits it rendered) gets the same report without Review rendering anything again; an
// invalid head is still loaded by Review, for its problems.
func TestReviewOfLoadedSides(t *testing.T) {
	t.Parallel()
	base := example(t)
	head := change(t, base, "clusters/prod-eu-1.yaml", "monitoring_retention: 30d", "monitoring_retention: 90d")
	in := Input{Base: base, Head: head, BaseRev: "base", HeadRev: "head", Author: "bob", Member: memberOf("payments-devs")}
	fresh := &countingRenderer{r: fanout.NewRenderer(fanout.Options{})}
	want, err := Review(in, fresh)
	require.NoError(t, err)
	assert.Equal(t, 2, fresh.n, "both sides rendered")

	loaded := func(tree fs.FS) *Loaded {
		repo, err := control.Load(tree)
		require.NoError(t, err)
		targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
		require.NoError(t, err)
		return &Loaded{Repo: repo, Targets: targets}
	}
	in.BaseLoaded, in.HeadLoaded = loaded(base), loaded(head)
	reuse := &countingRenderer{r: fanout.NewRenderer(fanout.Options{})}
	got, err := Review(in, reuse)
	require.NoError(t, err)
	assert.Zero(t, reuse.n, "nothing rendered again")
	assert.Equal(t, want, got)

	bad := change(t, base, "clusters/prod-eu-1.yaml", "workspace: payments", "workspace: paymnts")
	in = Input{Base: base, Head: bad, BaseRev: "base", HeadRev: "head", Author: "bob", BaseLoaded: loaded(base)}
	rep, err := Review(in, reuse)
	require.NoError(t, err)
	assert.Equal(t, Invalid, rep.Verdict)
	assert.NotEmpty(t, rep.Issues)
}
