package github_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// raceOpts are the pull request options of the race tests.
var raceOpts = pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}

// editFile changes one managed file of tg, so that its pull request is updated.
func editFile(tg *fanout.Target, note string) {
	tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# "+note+"\n"...)
}

// assertNoStaleMoves checks the fake's ref-move log: every move fleetbot's App made named the
// head it replaced (or was GitHub's own, a merge or the Contents API's bootstrap commit).
func assertNoStaleMoves(t *testing.T, e *env) {
	t.Helper()
	n := 0
	for _, m := range e.srv.RefMoves() {
		if m.Actor != githubtest.DefaultAppSlug+"[bot]" {
			continue
		}
		n++
		assert.Contains(t, []githubtest.Guard{githubtest.GuardExpected, githubtest.GuardServer}, m.Guard,
			"%s %s %s..%s via %s names no head it replaces", m.Repo, m.Ref, m.Before, m.After, m.Via)
	}
	assert.Positive(t, n, "fleetbot moved refs")
}

// TestHumanPushBetweenSnapshotAndWriteIsKept is the race of DESIGN §8 with each way fleetbot
// moves a branch: a person pushes to the bot branch after fleetbot's snapshot and before its
// write. fleetbot's move names the head it read, so GitHub refuses it: Apply fails with
// pr.ErrRefMoved (retryable, reason RefMoved), the person's commit stays, and the next plan —
// from a fresh read of the branch, not the cache — blocks the pull request. Every move
// fleetbot made names the head it replaced (the fake's ref-move log).
func TestHumanPushBetweenSnapshotAndWriteIsKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		transport ghforge.ContentTransport
		opts      []githubtest.Option
		via       string
	}{
		{"updateRefs", ghforge.ContentTransportAPI, nil, "graphql"},
		{"git push lease", ghforge.ContentTransportGit, nil, "git"},
		{"no updateRefs: git push of the ref", ghforge.ContentTransportAPI, []githubtest.Option{githubtest.WithoutUpdateRefs()}, "git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts...)
			ctx := context.Background()
			var logs bytes.Buffer
			f, _ := e.transportForge(t, tc.transport, &logs)
			tg := clusterTarget(t, e)
			step := func(want pr.Action) {
				t.Helper()
				if len(tc.opts) == 0 {
					applyStep(t, e, f, tg, want)
					return
				}
				// Without updateRefs, the first move of a process also sends the mutation
				// GitHub refuses: one write more than priced, once.
				d, err := pr.Plan(ctx, f, tg, raceOpts)
				require.NoError(t, err)
				require.Equal(t, want, d.Action, d.Reason)
				_, err = pr.Apply(ctx, f, tg, d, raceOpts)
				require.NoError(t, err)
			}
			step(pr.ActionCreate)
			editFile(tg, "first update")
			step(pr.ActionUpdate) // a move of an existing bot branch that succeeds

			editFile(tg, "second update")
			d, err := pr.Plan(ctx, f, tg, raceOpts)
			require.NoError(t, err)
			require.Equal(t, pr.ActionUpdate, d.Action)
			e.srv.CreateUser("alice")
			human := e.srv.CommitAs("alice", "acme", tg.Repo, "fleetbot/sync", "hand fix", map[string]string{"notes.txt": "mine\n"})

			_, err = pr.Apply(ctx, f, tg, d, raceOpts)
			require.ErrorIs(t, err, pr.ErrRefMoved)
			assert.Equal(t, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonRefMoved}, report.ClassOf(err))
			assert.Contains(t, err.Error(), "branch fleetbot/sync of acme/"+tg.Repo+" is at "+report.ShortSHA(human))
			assert.Equal(t, human, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "the human commit stays")

			d, err = pr.Plan(ctx, f, tg, raceOpts)
			require.NoError(t, err)
			assert.Equal(t, pr.ActionBlocked, d.Action, d.Reason)
			assertNoStaleMoves(t, e)
			vias := map[string]bool{}
			for _, m := range e.srv.RefMoves() {
				if m.Before != "" && m.After != "" && m.Actor != "alice" {
					vias[m.Via] = true // the moves of existing branches (a create is a POST)
				}
			}
			assert.Equal(t, map[string]bool{tc.via: true}, vias, "how fleetbot moved existing branches")
			if len(tc.opts) > 0 {
				assert.Equal(t, 1, strings.Count(logs.String(), "no GraphQL updateRefs"), "said once: %s", logs.String())
			}
		})
	}
}

// TestBranchCreationNamesThatItMustNotExist: a branch the snapshot showed missing and someone
// created since is not taken over: the create is refused (GitHub: 422 "Reference already
// exists"), Apply fails with pr.ErrRefMoved, and their branch stays.
func TestBranchCreationNamesThatItMustNotExist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := e.forge(t, false)
	tg := clusterTarget(t, e)
	d, _ := applyStep(t, e, f, tg, pr.ActionCreate)
	require.NotNil(t, d.PR)
	// Merge fleetbot's pull request: the bot branch is deleted by the next run.
	_, _, err := e.srv.Client().PullRequests.Merge(ctx, "acme", tg.Repo, d.PR.Number, "", nil)
	require.NoError(t, err)
	applyStep(t, e, f, tg, pr.ActionCleanup)
	require.Empty(t, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"))

	editFile(tg, "new change")
	d, err = pr.Plan(ctx, f, tg, raceOpts)
	require.NoError(t, err)
	require.Equal(t, pr.ActionOpen, d.Action)
	e.srv.CreateUser("alice")
	theirs := e.srv.CommitAs("alice", "acme", tg.Repo, "fleetbot/sync", "mine", map[string]string{"notes.txt": "mine\n"})
	_, err = pr.Apply(ctx, f, tg, d, raceOpts)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	assert.Contains(t, err.Error(), "is at "+report.ShortSHA(theirs)+", not absent")
	assert.Equal(t, theirs, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"))
	assertNoStaleMoves(t, e)
}

// TestBranchDeletionNamesTheHeadItRead: when the default branch already matches, fleetbot
// closes its pull request and deletes the bot branch, but only while the branch is where it
// read it: a commit pushed since keeps the branch (pr.ErrRefMoved). Without the race the
// branch is deleted, with updateRefs or, where GitHub has none, a git push.
func TestBranchDeletionNamesTheHeadItRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []githubtest.Option
		via  string
	}{
		{"updateRefs", nil, "graphql"},
		{"no updateRefs", []githubtest.Option{githubtest.WithoutUpdateRefs()}, "git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, race := range []bool{true, false} {
				e := newEnv(t, tc.opts...)
				ctx := context.Background()
				f := e.forge(t, false)
				tg := clusterTarget(t, e)
				d, err := pr.Plan(ctx, f, tg, raceOpts)
				require.NoError(t, err)
				_, err = pr.Apply(ctx, f, tg, d, raceOpts)
				require.NoError(t, err)
				// The control repo goes back to what the default branch holds.
				boot := map[string][]byte{}
				for _, p := range []string{"README.md", ".github/CODEOWNERS"} {
					boot[p] = tg.Files[p]
				}
				tg.Files = boot
				d, err = pr.Plan(ctx, f, tg, raceOpts)
				require.NoError(t, err)
				require.True(t, d.DeleteBranch, d.Reason)
				if !race {
					e.srv.ResetRefMoves()
					_, err = pr.Apply(ctx, f, tg, d, raceOpts)
					require.NoError(t, err)
					assert.Empty(t, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "deleted")
					moves := e.srv.RefMoves()
					require.Len(t, moves, 1)
					assert.Equal(t, tc.via, moves[0].Via)
					assert.Equal(t, githubtest.GuardExpected, moves[0].Guard)
					continue
				}
				e.srv.CreateUser("alice")
				human := e.srv.CommitAs("alice", "acme", tg.Repo, "fleetbot/sync", "keep this", map[string]string{"notes.txt": "mine\n"})
				_, err = pr.Apply(ctx, f, tg, d, raceOpts)
				require.ErrorIs(t, err, pr.ErrRefMoved)
				assert.Equal(t, human, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "the branch and its new commit stay")
				assertNoStaleMoves(t, e)
			}
		})
	}
}

// TestRepeatedMoveAfterALostAnswer: a move whose answer was lost after GitHub made it is asked
// again (the caller still names the head it read): the branch is already where it was asked to
// be, so the compare-and-swap's refusal is no error.
func TestRepeatedMoveAfterALostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f := e.forge(t, false)
	tg := clusterTarget(t, e)
	applyStep(t, e, f, tg, pr.ActionCreate)
	read := e.srv.Branch("acme", tg.Repo, "fleetbot/sync")
	base := e.srv.Branch("acme", tg.Repo, "main")
	c, err := f.Commit(ctx, "acme", tg.Repo, pr.NewCommit{Parent: base, BaseTree: treeOf(t, e, tg.Repo, base), Message: "again\n",
		Changes: []pr.Change{{Path: "notes.txt", Content: []byte("x\n")}}})
	require.NoError(t, err)
	e.srv.Fault("POST /api/graphql", githubtest.FaultSpec{LoseResponse: true, Times: 1, Mutation: "updateRefs"})
	require.Error(t, f.SetBranch(ctx, "acme", tg.Repo, "fleetbot/sync", c.SHA, read), "the answer is lost")
	assert.Equal(t, c.SHA, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "GitHub moved it")
	require.NoError(t, f.SetBranch(ctx, "acme", tg.Repo, "fleetbot/sync", c.SHA, read), "asked again: already there")
}

// treeOf is the tree of a commit in the fake.
func treeOf(t *testing.T, e *env, repo, sha string) string {
	t.Helper()
	c, _, err := e.srv.Client().Git.GetCommit(context.Background(), "acme", repo, sha)
	require.NoError(t, err)
	return c.GetTree().GetSHA()
}

// TestBootstrapRaceOnAnEmptyRepo is the handover race of two replicas (two forges, each with
// its own cache): both read one empty repo, and the one that held it a moment ago initialises
// it first. GitHub refuses the other's bootstrap (the Contents API's create of a file that
// exists now, 422): it fails with pr.ErrRefMoved (retryable, reason RefMoved), writes nothing
// over the first one's branch, and planned again from a fresh snapshot it builds on that
// branch: one history, one pull request.
func TestBootstrapRaceOnAnEmptyRepo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tg := clusterTarget(t, e)
	_, _, err := e.srv.Client().Repositories.Create(ctx, "acme", &gh.Repository{Name: gh.String(tg.Repo), Private: gh.Bool(true)})
	require.NoError(t, err)
	first := e.forge(t, false)
	other := *e
	other.cacheDir = t.TempDir()
	second := other.forge(t, false)

	d1, err := pr.Plan(ctx, first, tg, raceOpts)
	require.NoError(t, err)
	d2, err := pr.Plan(ctx, second, tg, raceOpts)
	require.NoError(t, err)
	require.NotEmpty(t, d2.Bootstrap, "the second read the repo empty")
	require.NoError(t, first.BeforeWrite(ctx, tg.Owner, tg.Repo, d1.Cost()))
	_, err = pr.Apply(ctx, first, tg, d1, raceOpts)
	require.NoError(t, err)
	main := e.srv.Branch("acme", tg.Repo, "main")
	require.NotEmpty(t, main)

	require.NoError(t, second.BeforeWrite(ctx, tg.Owner, tg.Repo, d2.Cost()))
	_, err = pr.Apply(ctx, second, tg, d2, raceOpts)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	assert.Equal(t, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonRefMoved}, report.ClassOf(err))
	assert.Contains(t, err.Error(), "acme/"+tg.Repo)
	assert.Equal(t, main, e.srv.Branch("acme", tg.Repo, "main"), "nothing written over the first one's branch")

	d2, err = pr.Plan(ctx, second, tg, raceOpts)
	require.NoError(t, err, "planned again from a fresh snapshot")
	assert.Empty(t, d2.Bootstrap, "the repo is initialised now")
	if d2.Writes() {
		require.NoError(t, second.BeforeWrite(ctx, tg.Owner, tg.Repo, d2.Cost()))
		_, err = pr.Apply(ctx, second, tg, d2, raceOpts)
		require.NoError(t, err)
	}
	assert.Len(t, e.srv.Pulls("acme", tg.Repo), 1, "one pull request")
	assertNoStaleMoves(t, e)
}
