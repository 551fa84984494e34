package reconcile

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// racingForge is a forge on which someone pushes to a branch right before fleetbot moves it:
// after fleetbot's snapshot, before its write. race runs before the first `times` moves of
// branch.
type racingForge struct {
	Forge
	branch string
	race   func(repo string)

	mu    sync.Mutex
	times int
	moves []string // expect of every move of branch, in order
}

func (f *racingForge) SetBranch(ctx context.Context, owner, repo, branch, sha, expect string) error {
	if branch == f.branch {
		f.mu.Lock()
		f.moves = append(f.moves, expect)
		run := f.times > 0
		f.times--
		f.mu.Unlock()
		if run {
			f.race(repo)
		}
	}
	return f.Forge.SetBranch(ctx, owner, repo, branch, sha, expect)
}

// TestLostRaceIsPlannedAgainInTheSameRun: a person pushes to the bot branch between fleetbot's
// snapshot and its write. The move, naming the head fleetbot read, is refused and writes
// nothing over the commit; reconcile plans the repo again from a fresh snapshot in the same
// run, which sees the commit and blocks the pull request (needs-human, HumanCommitOnBranch)
// instead of failing. On both forges.
func TestLostRaceIsPlannedAgainInTheSameRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    func(t *testing.T, fl fleet) *harness
	}{
		{"local", func(t *testing.T, _ fleet) *harness { return localHarness(t) }},
		{"github", func(t *testing.T, fl fleet) *harness { h, _ := githubHarness(t, fl); return h }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fl := fleet{"a": "v1"}
			h := tc.h(t, fl)
			_, err := apply(t, h.forge, fl, Options{})
			require.NoError(t, err)

			var human string
			rf := &racingForge{Forge: h.forge, branch: "fleetbot/sync", times: 1, race: func(repo string) {
				human = h.humanCommit(t, repo, "fleetbot/sync", map[string]string{"notes.txt": "mine\n"})
			}}
			fl["a"] = "v2"
			rep, err := apply(t, rf, fl, Options{})
			require.NoError(t, err)
			r := byRepo(rep)["cluster-a"]
			require.NoError(t, r.Err)
			assert.Equal(t, pr.ActionBlocked, r.Action, r.Reason)
			assert.Equal(t, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonHumanCommitOnBranch}, r.Outcome())
			assert.Equal(t, human, h.refs(t, "cluster-a")["fleetbot/sync"], "the human commit is never overwritten")
			comments := h.comments(t, "cluster-a", 1)
			require.Len(t, comments, 1)
			assert.Contains(t, comments[0], report.ShortSHA(human))
			assert.Len(t, rf.moves, 1, "one move, refused; the new plan moves nothing")
		})
	}
}

// TestSecondLostRaceIsRetryable: another replica of fleetbot (its own process and cache, the
// same App) moves the bot branch, with a commit of its own for a newer control commit, each
// time just before this one writes: the first lost race is planned again (the branch is
// fleetbot's, so the pull request is rebuilt on it), the second is the repo's result, retryable
// with reason RefMoved. Each attempt named the head its snapshot read, and the other replica's
// commit stays.
func TestSecondLostRaceIsRetryable(t *testing.T) {
	t.Parallel()
	fl := fleet{"a": "v1"}
	h, srv := githubHarness(t, fl)
	_, err := apply(t, h.forge, fl, Options{})
	require.NoError(t, err)
	bot := h.refs(t, "cluster-a")["fleetbot/sync"]
	require.NotEmpty(t, bot)

	other := secondReplica(t, srv)
	var theirs []string
	rf := &racingForge{Forge: h.forge, branch: "fleetbot/sync", times: 2, race: func(repo string) {
		newer := fleet{"a": fmt.Sprintf("v%d", 3+len(theirs))}
		rep, err := apply(t, other, newer, Options{})
		require.NoError(t, err)
		require.NoError(t, byRepo(rep)["cluster-a"].Err)
		theirs = append(theirs, h.refs(t, repo)["fleetbot/sync"])
	}}
	fl["a"] = "v2"
	rep, err := apply(t, rf, fl, Options{})
	require.Error(t, err, "the repo failed")
	r := byRepo(rep)["cluster-a"]
	require.ErrorIs(t, r.Err, pr.ErrRefMoved)
	assert.Equal(t, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonRefMoved}, r.Outcome())
	require.Len(t, theirs, 2)
	assert.Equal(t, theirs[1], h.refs(t, "cluster-a")["fleetbot/sync"], "the other replica's commit stays")
	assert.Equal(t, []string{bot, theirs[0]}, rf.moves, "each attempt named the head its snapshot read")
}

// secondReplica is another fleetbot process on the fake GitHub: its own client and cache, the
// same App.
func secondReplica(t *testing.T, srv *githubtest.Server) Forge {
	t.Helper()
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1},
	})
	require.NoError(t, err)
	return ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: t.TempDir()})
}
