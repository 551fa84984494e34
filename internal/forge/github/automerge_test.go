package github_test

import (
	"context"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// protectWithoutReview protects main of acme/adopted without requiring a review: a pull
// request into it stays "clean".
func protectWithoutReview(t *testing.T, e *env) {
	t.Helper()
	_, _, err := e.srv.Client().Repositories.UpdateBranchProtection(context.Background(), "acme", "adopted", "main", &gh.ProtectionRequest{})
	require.NoError(t, err)
}

// TestAutoMergeCleanUnprotectedNotMerged: a fleetbot pull request is only "clean" when main's
// protection is missing or weaker than fleetbot's (someone removed it). fleetbot then merges
// nothing: the error says the protection is weaker, how, and to merge by hand.
func TestAutoMergeCleanUnprotectedNotMerged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	p, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.ErrorIs(t, err, ghforge.ErrAutoMerge)
	require.NotNil(t, p, "the pull request is open and reported")
	assert.Equal(t, pr.StateOpen, p.State)
	for _, want := range []string{"acme/adopted", "#1", "mergeable without review", "Pull request is in clean status", "branch main is not protected", "merge it by hand"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.False(t, e.srv.Pulls("acme", "adopted")[0].GetMerged(), "not merged")
	_, ok := e.srv.File("acme", "adopted", "main", "x.yaml")
	assert.False(t, ok, "main unchanged")

	// Protection present but weaker than fleetbot's (no code-owner review): same.
	e = newEnv(t)
	np = autoMergeRepo(t, e)
	protectWithoutReview(t, e)
	_, err = e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.ErrorIs(t, err, ghforge.ErrAutoMerge)
	assert.Contains(t, err.Error(), "code owner reviews are not required")
	assert.False(t, e.srv.Pulls("acme", "adopted")[0].GetMerged(), "not merged")
}

// TestAutoMergeProtectionNotEnforced: where GitHub cannot protect the branch (a private repo
// on the free plan answers 403 "Upgrade to GitHub Pro"), a clean pull request is never merged
// directly, and the error says so precisely.
func TestAutoMergeProtectionNotEnforced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	e.srv.Fault("GET /repos/{owner}/{repo}/branches/{branch}/protection", githubtest.FaultSpec{Status: 403,
		Message: "Upgrade to GitHub Pro or make this repository public to enable this feature."})
	_, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.ErrorIs(t, err, ghforge.ErrAutoMerge)
	assert.Contains(t, err.Error(), "pull request #1 of acme/adopted is clean because protection is not enforced; merge by hand")
	assert.False(t, e.srv.Pulls("acme", "adopted")[0].GetMerged(), "not merged")
}

// TestAutoMergeHeadNotFleetbots: a commit someone pushed to fleetbot/sync after fleetbot's
// own (between SetBranch and the pull request) is never merged nor given auto-merge: the head
// GitHub reports is not the one fleetbot pushed.
func TestAutoMergeHeadNotFleetbots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	protectWithoutReview(t, e)
	np.Protection = nil // even where a direct merge would be allowed
	human := e.srv.Commit("acme", "adopted", "fleetbot/sync", "sneak", map[string]string{"evil.yaml": "x: 2\n"})
	p, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.ErrorIs(t, err, ghforge.ErrAutoMerge)
	require.NotNil(t, p)
	for _, want := range []string{"#1", "acme/adopted", report.ShortSHA(human), report.ShortSHA(np.HeadSHA), "someone else pushed", "by hand"} {
		assert.Contains(t, err.Error(), want)
	}
	ps := e.srv.Pulls("acme", "adopted")
	assert.False(t, ps[0].GetMerged(), "not merged")
	assert.Nil(t, ps[0].GetAutoMerge(), "no auto-merge")
	_, ok := e.srv.File("acme", "adopted", "main", "evil.yaml")
	assert.False(t, ok, "main unchanged")
}

// TestAdoptOnlyFleetbotsPullRequest: when GitHub says a pull request from fleetbot/sync already
// exists (an answer fleetbot lost, or a stale view), fleetbot continues with it only when it is
// fleetbot's (its marker, or the head fleetbot pushed). One a human opened from the branch is
// left as it is, and the error names it and says what to do.
func TestAdoptOnlyFleetbotsPullRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	np.AutoMerge = false
	np.HeadSHA = e.srv.Branch("acme", "adopted", "main") // fleetbot believes it pushed another commit
	_, _, err := e.srv.Client().PullRequests.Create(context.Background(), "acme", "adopted",
		&gh.NewPullRequest{Title: gh.String("mine"), Head: gh.String("fleetbot/sync"), Base: gh.String("main"), Body: gh.String("my notes")})
	require.NoError(t, err)
	_, err = e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.Error(t, err)
	for _, want := range []string{"acme/adopted", "pull request #1", "not fleetbot's", "no fleetbot marker", "close it"} {
		assert.Contains(t, err.Error(), want)
	}
	ps := e.srv.Pulls("acme", "adopted")
	require.Len(t, ps, 1)
	assert.Equal(t, "mine", ps[0].GetTitle(), "left as it is")
	assert.Equal(t, "my notes", ps[0].GetBody())

	// The head fleetbot pushed: its own pull request, whose answer was lost.
	np.HeadSHA = ps[0].GetHead().GetSHA()
	p, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.NoError(t, err)
	assert.Equal(t, 1, p.Number)
	assert.Equal(t, "t", e.srv.Pulls("acme", "adopted")[0].GetTitle(), "adopted")
}

// TestAutoMergeAfterProtectionRemoved: with merge: auto, someone removes the protection of a
// repo's main; the next change's pull request is not merged unreviewed. When the run reads the
// repo's access (here: always), it converges protection before it opens the pull request,
// which then waits for review with auto-merge; when the access it holds is still the cached
// one, the pull request GitHub finds clean is left open with an error that says why.
func TestAutoMergeAfterProtectionRemoved(t *testing.T) {
	t.Parallel()
	for _, fresh := range []bool{true, false} {
		t.Run(map[bool]string{true: "access read", false: "access cached"}[fresh], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			setMergeAuto(t, e)
			e.mergeAll(t, e.apply(t, e.forge(t, false)))
			name := e.targets[0].Repo
			_, err := e.srv.Client().Repositories.RemoveBranchProtection(context.Background(), "acme", name, "main")
			require.NoError(t, err)
			require.False(t, e.srv.Protected("acme", name, "main"))
			editTarget(t, e.targets, name)
			f := e.forge(t, false)
			if fresh {
				c, err := ghforge.New(context.Background(), ghforge.Config{
					APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme", Budget: e.budget,
				})
				require.NoError(t, err)
				f = ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: e.cacheDir, AccessMaxAge: -1})
			}
			rep, _ := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
			var res *reconcile.Result
			for i := range rep.Results {
				if rep.Results[i].Repo == "acme/"+name {
					res = &rep.Results[i]
				}
			}
			require.NotNil(t, res)
			assert.Equal(t, 2, res.PR, res.Line())
			assert.False(t, res.Merged, res.Line())
			assert.NotContains(t, res.Line(), "(merged)")
			var second *gh.PullRequest
			for _, p := range e.srv.Pulls("acme", name) {
				if p.GetNumber() == 2 {
					second = p
				}
			}
			require.NotNil(t, second)
			assert.False(t, second.GetMerged(), "PR #2 is not merged unreviewed")
			if fresh {
				assert.NoError(t, res.Err, res.Line())
				assert.Equal(t, "merge", second.GetAutoMerge().GetMergeMethod(), "auto-merge waits for the review")
				assert.True(t, e.srv.Protected("acme", name, "main"), "protection restored first")
			} else {
				require.ErrorIs(t, res.Err, ghforge.ErrAutoMerge)
				assert.Contains(t, res.Err.Error(), "branch main is not protected")
			}
		})
	}
}

// TestEnableAutoMergeOnAnOpenPullRequest: auto-merge is enabled on a pull request already
// open (a held restore once fleetbot may merge), as GitHub allows on any open pull request,
// pinned to the head fleetbot names: a head that moved since gets no auto-merge, with an error
// that says so; the head named gets it, and nothing else opens.
func TestEnableAutoMergeOnAnOpenPullRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	np.AutoMerge = false
	_, _, err := e.srv.Client().Repositories.UpdateBranchProtection(ctx, "acme", "adopted", "main", &gh.ProtectionRequest{
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1},
	})
	require.NoError(t, err)
	f := e.forge(t, false)
	p, err := f.OpenPR(ctx, "acme", "adopted", np)
	require.NoError(t, err)
	require.Nil(t, e.srv.Pulls("acme", "adopted")[0].GetAutoMerge(), "opened without auto-merge")
	a := pr.AutoMergeRequest{Head: np.Head, Base: np.Base, HeadSHA: np.HeadSHA, Protection: np.Protection}

	moved := e.srv.Commit("acme", "adopted", "fleetbot/sync", "sneak", map[string]string{"evil.yaml": "x: 2\n"})
	merged, err := f.EnableAutoMerge(ctx, "acme", "adopted", p.Number, a)
	require.ErrorIs(t, err, ghforge.ErrAutoMerge)
	assert.False(t, merged)
	for _, want := range []string{"#1", "acme/adopted", report.ShortSHA(moved), report.ShortSHA(np.HeadSHA), "someone else pushed"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Nil(t, e.srv.Pulls("acme", "adopted")[0].GetAutoMerge(), "a moved head gets no auto-merge")

	a.HeadSHA = moved
	merged, err = f.EnableAutoMerge(ctx, "acme", "adopted", p.Number, a)
	require.NoError(t, err)
	assert.False(t, merged, "waits for the review")
	ps := e.srv.Pulls("acme", "adopted")
	require.Len(t, ps, 1, "the same pull request, none opened")
	assert.Equal(t, "merge", ps[0].GetAutoMerge().GetMergeMethod())
	assert.Equal(t, "open", ps[0].GetState())
}
