package pr_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n  namespace: demo\ndata:\n  a: \"1\"\n"

// clusterTarget is a cluster repo with a manifest, a scaffold and the platform team's access.
func clusterTarget() *fanout.Target {
	return &fanout.Target{
		Kind: fanout.KindCluster, Name: "a", Owner: "acme", Repo: "cluster-a", DefaultBranch: "main",
		Files: map[string][]byte{
			"README.md":          []byte("readme\n"),
			".github/CODEOWNERS": []byte("* @acme/platform\n"),
			"platform/m.yaml":    []byte(configMap),
		},
		Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")},
		Reviewers: []string{"platform"},
		Access: policy.Access{
			Teams:      map[string]policy.Role{"platform": policy.RoleAdmin},
			Protection: &policy.Protection{Branch: "main", RequirePullRequest: true},
		},
	}
}

// counting is the local forge, counting the writes pr makes through it by method.
type counting struct {
	*local.Forge
	mu    sync.Mutex
	calls map[string]int
}

func (c *counting) count(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[m]++
}

func (c *counting) CreateRepo(ctx context.Context, s pr.RepoSpec) error {
	c.count("CreateRepo")
	return c.Forge.CreateRepo(ctx, s)
}

func (c *counting) Commit(ctx context.Context, owner, repo string, nc pr.NewCommit) (pr.Commit, error) {
	c.count("Commit")
	return c.Forge.Commit(ctx, owner, repo, nc)
}

func (c *counting) SetBranch(ctx context.Context, owner, repo, branch, sha, expect string) error {
	c.count("SetBranch")
	return c.Forge.SetBranch(ctx, owner, repo, branch, sha, expect)
}

func (c *counting) DeleteBranch(ctx context.Context, owner, repo, branch, expect string) error {
	c.count("DeleteBranch")
	return c.Forge.DeleteBranch(ctx, owner, repo, branch, expect)
}

func (c *counting) OpenPR(ctx context.Context, owner, repo string, np pr.NewPR) (*pr.PullRequest, error) {
	c.count("OpenPR")
	return c.Forge.OpenPR(ctx, owner, repo, np)
}

func (c *counting) EnableAutoMerge(ctx context.Context, owner, repo string, n int, a pr.AutoMergeRequest) (bool, error) {
	c.count("EnableAutoMerge")
	return c.Forge.EnableAutoMerge(ctx, owner, repo, n, a)
}

func (c *counting) UpdatePR(ctx context.Context, owner, repo string, n int, title, body string) error {
	c.count("UpdatePR")
	return c.Forge.UpdatePR(ctx, owner, repo, n, title, body)
}

func (c *counting) ClosePR(ctx context.Context, owner, repo string, n int, comment string) error {
	c.count("ClosePR")
	return c.Forge.ClosePR(ctx, owner, repo, n, comment)
}

func (c *counting) Comment(ctx context.Context, owner, repo string, n int, body string) error {
	c.count("Comment")
	return c.Forge.Comment(ctx, owner, repo, n, body)
}

func (c *counting) RecordMerged(ctx context.Context, owner, repo string, n int) error {
	c.count("RecordMerged")
	return c.Forge.RecordMerged(ctx, owner, repo, n)
}

// Capabilities passes on the local forge's, with the merge recorder counted.
func (c *counting) Capabilities() pr.Capabilities {
	caps := c.Forge.Capabilities()
	caps.MergeRecorder = c
	return caps
}

func (c *counting) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func newForge(t *testing.T) *counting {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return t0 }, LockTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return &counting{Forge: f, calls: map[string]int{}}
}

var opts = pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "1111111111111111111111111111111111111111"}

// step plans and applies tg once, checks the action, and holds the decision's Cost to the
// writes Apply really made through the forge.
func step(t *testing.T, f *counting, tg *fanout.Target, o pr.Options, want pr.Action) (*pr.Decision, *pr.PullRequest) {
	t.Helper()
	ctx := context.Background()
	d, err := pr.Plan(ctx, f, tg, o)
	require.NoError(t, err)
	require.Equal(t, want, d.Action, d.Reason)
	f.take()
	p, err := pr.Apply(ctx, f, tg, d, o)
	require.NoError(t, err, d.Reason)
	calls, c := f.take(), d.Cost()
	assert.Equal(t, c.CreateRepo, calls["CreateRepo"], "repos created (%s)", want)
	assert.Equal(t, c.Commits, calls["Commit"], "commits (%s)", want)
	assert.Equal(t, c.BranchMoves, calls["SetBranch"], "branch moves (%s)", want)
	assert.Equal(t, c.BranchDeletes, calls["DeleteBranch"], "branch deletions (%s)", want)
	assert.Equal(t, c.PROpens, calls["OpenPR"], "PRs opened (%s)", want)
	assert.Equal(t, c.PRUpdates, calls["UpdatePR"], "PR updates (%s)", want)
	assert.Equal(t, c.PRCloses, calls["ClosePR"], "PRs closed (%s)", want)
	assert.Equal(t, c.Comments, calls["Comment"]+calls["ClosePR"], "comments (%s)", want)
	assert.Equal(t, c.MergeRecords, calls["RecordMerged"], "merges recorded (%s)", want)
	assert.Equal(t, d.Writes(), len(calls) > 0, "Writes() says whether anything is written (%s)", want)
	return d, p
}

func onlyPR(t *testing.T, f *counting) *pr.PullRequest {
	t.Helper()
	ps, err := f.PullRequests("acme", "cluster-a")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	return ps[0]
}

// TestNewRepoBootstrapsAndOpensOnePR: a new target repo is created with only README,
// CODEOWNERS and scaffolds on its default branch, and the managed content arrives through one
// PR whose body names the source commit, the files, the objects and who must review; the next
// run writes nothing.
func TestNewRepoBootstrapsAndOpensOnePR(t *testing.T) {
	f := newForge(t)
	tg := clusterTarget()
	d, p := step(t, f, tg, opts, pr.ActionCreate)
	require.NotNil(t, p)
	assert.True(t, d.CreateRepo)
	assert.Equal(t, 1, d.Cost().Bootstrap)

	s, err := f.Snapshot(context.Background(), "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"README.md", ".github/CODEOWNERS", "apps/kustomization.yaml"}, s.Files.Paths(),
		"the default branch holds the bootstrap only")
	assert.Equal(t, pr.StateOpen, p.State)
	assert.Equal(t, "fleetbot/sync", p.Head)
	assert.Equal(t, "main", p.Base)
	assert.Equal(t, "fleetbot: sync cluster a", p.Title)
	assert.True(t, pr.HasMarker(p.Body))
	for _, want := range []string{"`1111111111111111111111111111111111111111`", "`platform/m.yaml` | added", "| ConfigMap | 1 | 0 | 0 |", "added `ConfigMap/demo/m`", "@acme/platform"} {
		assert.Contains(t, p.Body, want)
	}
	assert.Equal(t, opts.Source, pr.SourceOf(p.Body), "the PR records its source")
	assert.Contains(t, s.Bot.Message, pr.TrailerSource+": "+opts.Source, "the bot commit names its source")

	d, _ = step(t, f, tg, opts, pr.ActionNoop)
	assert.Equal(t, pr.Cost{}, d.Cost(), "a no-op costs nothing")
	assert.Equal(t, p.Number, d.PR.Number)
}

// TestUpdateInPlaceAndRebuildOnMovedBase: a new control-repo commit updates the same PR; a
// human commit to the default branch (outside managed paths) makes fleetbot rebuild the bot
// branch on the new base, keeping the human's file.
func TestUpdateInPlaceAndRebuildOnMovedBase(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, first := step(t, f, tg, opts, pr.ActionCreate)

	tg.Files = maps.Clone(tg.Files)
	tg.Files["platform/m.yaml"] = []byte(strings.Replace(configMap, `"1"`, `"2"`, 1))
	o := opts
	o.Source = "2222222222222222222222222222222222222222"
	d, _ := step(t, f, tg, o, pr.ActionUpdate)
	assert.Contains(t, d.Reason, "desired state changed")
	p := onlyPR(t, f)
	assert.Equal(t, first.Number, p.Number, "updated in place")
	assert.Contains(t, p.Body, o.Source)
	assert.Equal(t, o.Source, pr.SourceOf(p.Body), "the body names the new source")

	// Someone adds a file of their own to main.
	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	c, err := f.Forge.Commit(ctx, "acme", "cluster-a", pr.NewCommit{Parent: s.Base.SHA, BaseTree: s.Base.Tree,
		Changes: []pr.Change{{Path: "apps/team.yaml", Content: []byte("kind: ConfigMap\n")}}, Message: "team app\n"})
	require.NoError(t, err)
	require.NoError(t, f.Forge.SetBranch(ctx, "acme", "cluster-a", "main", c.SHA, s.Base.SHA))

	d, _ = step(t, f, tg, o, pr.ActionUpdate)
	assert.Contains(t, d.Reason, "moved")
	s, err = f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, []string{c.SHA}, s.Bot.Parents, "the bot branch is rebuilt on the moved default branch")
	blob, err := f.Blob(ctx, "acme", "cluster-a", s.Files["apps/team.yaml"].Hash)
	require.NoError(t, err)
	assert.Equal(t, "kind: ConfigMap\n", string(blob))
}

// TestHumanCommitBlocksOnce: a commit someone else pushed to the bot branch stops fleetbot:
// it says so once on the PR and never overwrites the commit, however often it runs.
func TestHumanCommitBlocksOnce(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, p := step(t, f, tg, opts, pr.ActionCreate)

	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	human, err := f.Forge.Commit(ctx, "acme", "cluster-a", pr.NewCommit{Parent: s.Bot.SHA, BaseTree: s.Bot.Tree,
		Changes: []pr.Change{{Path: "platform/m.yaml", Content: []byte("kind: ConfigMap # edited by hand\n")}}, Message: "hotfix\n"})
	require.NoError(t, err)
	require.NoError(t, f.Forge.SetBranch(ctx, "acme", "cluster-a", "fleetbot/sync", human.SHA, s.Bot.SHA))

	tg.Files = maps.Clone(tg.Files)
	tg.Files["platform/m.yaml"] = []byte(strings.Replace(configMap, `"1"`, `"3"`, 1))
	d, _ := step(t, f, tg, opts, pr.ActionBlocked)
	assert.True(t, d.Block)
	comments, err := f.Comments("acme", "cluster-a", p.Number)
	require.NoError(t, err)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], report.ShortSHA(human.SHA))

	d, _ = step(t, f, tg, opts, pr.ActionBlocked)
	assert.False(t, d.Writes(), "blocked once, silent after")
	comments, err = f.Comments("acme", "cluster-a", p.Number)
	require.NoError(t, err)
	assert.Len(t, comments, 1)
	s, err = f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, human.SHA, s.Bot.SHA, "the human commit is never overwritten")
}

// TestRevertClosesPRAndDeletesBranch: when the default branch already matches what the
// control repo asks for, the open PR is closed with a comment and its branch deleted.
func TestRevertClosesPRAndDeletesBranch(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, p := step(t, f, tg, opts, pr.ActionCreate)

	// The control repo goes back to what main holds: README and CODEOWNERS only.
	tg.Files = map[string][]byte{"README.md": tg.Files["README.md"], ".github/CODEOWNERS": tg.Files[".github/CODEOWNERS"]}
	d, _ := step(t, f, tg, opts, pr.ActionClose)
	assert.True(t, d.DeleteBranch)
	got := onlyPR(t, f)
	assert.Equal(t, pr.StateClosed, got.State)
	comments, err := f.Comments("acme", "cluster-a", p.Number)
	require.NoError(t, err)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "deletes `fleetbot/sync`")
	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Nil(t, s.Bot, "the bot branch is deleted")
	step(t, f, tg, opts, pr.ActionNoop)
}

// TestMergedByHandIsRecorded: a PR merged with plain git (the default branch moved to the bot
// commit) is recorded merged on the next run, which then writes nothing else but the cleanup
// of the merged branch: a run that writes is "cleanup", never "noop"; the run after writes
// nothing and is noop.
func TestMergedByHandIsRecorded(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, p := step(t, f, tg, opts, pr.ActionCreate)
	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	require.NoError(t, f.Forge.SetBranch(ctx, "acme", "cluster-a", "main", s.Bot.SHA, s.Base.SHA))

	d, _ := step(t, f, tg, opts, pr.ActionCleanup)
	assert.True(t, d.RecordMerged)
	assert.True(t, d.Writes())
	assert.False(t, d.Action.Writes(), "cleanup writes neither content nor a pull request")
	got := onlyPR(t, f)
	assert.Equal(t, p.Number, got.Number)
	assert.Equal(t, pr.StateMerged, got.State)
	d, _ = step(t, f, tg, opts, pr.ActionNoop)
	assert.False(t, d.Writes(), "noop writes nothing")
}

// TestRemovedTargetOpensRemovalPR: a cluster that left the control repo gets a PR removing
// the managed content; the scaffolds its admins own stay.
func TestRemovedTargetOpensRemovalPR(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, p := step(t, f, tg, opts, pr.ActionCreate)
	require.NoError(t, f.Merge(ctx, "acme", "cluster-a", p.Number, local.MergeSquash))
	step(t, f, tg, opts, pr.ActionCleanup)

	gone := clusterTarget()
	gone.Removed = true
	gone.Files = map[string][]byte{}
	d, removal := step(t, f, gone, opts, pr.ActionRemove)
	require.NotNil(t, removal)
	assert.Equal(t, "fleetbot: remove cluster a", removal.Title)
	assert.Contains(t, removal.Body, "The cluster left the control repo")
	assert.Contains(t, removal.Body, "| ConfigMap | 0 | 0 | 1 |")
	for _, fc := range d.Files {
		assert.NotEqual(t, "apps/kustomization.yaml", fc.Path, "scaffolds stay")
	}
	added, changed, removed := d.Counts()
	assert.Equal(t, 0, added+changed)
	assert.Positive(t, removed)
}

// TestAutoMergeAndLabelsReachTheForge: pullRequests.merge auto and labels are passed to the
// opened PR, and priced.
func TestAutoMergeAndLabelsReachTheForge(t *testing.T) {
	f := newForge(t)
	o := opts
	o.AutoMerge = true
	d, _ := step(t, f, clusterTarget(), o, pr.ActionCreate)
	c := d.Cost()
	assert.Equal(t, 1, c.Labels)
	assert.Equal(t, 1, c.AutoMerge)
	assert.Equal(t, 1, c.Grants)
	assert.Equal(t, 1, c.Protections)
}

// TestPlanReportsAnUnreadableRepo: a forge error while reading is an error naming the repo,
// never a decision.
func TestPlanReportsAnUnreadableRepo(t *testing.T) {
	f := newForge(t)
	tg := clusterTarget()
	tg.Owner = "../escape"
	_, err := pr.Plan(context.Background(), f, tg, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "../escape/cluster-a")
}

// TestBinary: content that is not UTF-8 text, or holds NUL, is binary.
func TestBinary(t *testing.T) {
	assert.False(t, pr.Binary([]byte("kind: ConfigMap\n")))
	assert.False(t, pr.Binary([]byte("héllo")))
	assert.True(t, pr.Binary([]byte{0xff, 0xfe}))
	assert.True(t, pr.Binary([]byte("a\x00b")))
}

// TestLargeTargetBodyFitsGitHub: a target of thousands of files (a workspace of many clusters)
// once made a pull request body of hundreds of kilobytes, which GitHub refuses with 422 "body
// is too long (maximum is 65536 characters)". The body is cut to at most pr.MaxBodyBytes, on a
// line boundary, and keeps who reviews and the state marker whole.
func TestLargeTargetBodyFitsGitHub(t *testing.T) {
	f := newForge(t)
	tg := clusterTarget()
	tg.Files = maps.Clone(tg.Files)
	for i := range 3000 {
		name := fmt.Sprintf("app-%04d-ünïcødé", i)
		tg.Files["platform/"+name+".yaml"] = []byte(strings.ReplaceAll(configMap, "name: m", "name: "+fmt.Sprintf("m%04d", i)))
	}
	_, p := step(t, f, tg, opts, pr.ActionCreate)
	require.NotNil(t, p)
	assert.LessOrEqual(t, len(p.Body), pr.MaxBodyBytes, "bytes")
	assert.True(t, utf8.ValidString(p.Body))
	assert.True(t, pr.HasMarker(p.Body), "the marker is kept")
	assert.Equal(t, opts.Source, pr.SourceOf(p.Body))
	assert.Contains(t, p.Body, "cut to fit GitHub's limit")
	assert.Contains(t, p.Body, "@acme/platform", "who reviews is kept")
	assert.Equal(t, strings.Count(p.Body, "<details"), strings.Count(p.Body, "</details>"), "an open block is closed")

	d, _ := step(t, f, tg, opts, pr.ActionNoop)
	assert.Equal(t, p.Number, d.PR.Number, "the cut body is fleetbot's: the next run is a no-op")
}
