package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestAssignRoles: scope gives each repo its role from the run's Only and Shard, the managed
// repos the owner holds and the platform's control repo, and refuses what cannot be one fleet.
func TestAssignRoles(t *testing.T) {
	t.Parallel()
	fl := fleet{"a": "1", "b": "1", "c": "1"}
	repo := fl.repo()
	repo.Platform.Spec.Repos.Control = "control"
	managed := []pr.ManagedRepo{{Kind: fanout.KindCluster, Name: "a", Repo: "cluster-a"}, {Kind: fanout.KindCluster, Name: "gone", Repo: "cluster-gone"}}
	roles := func(repo *control.Repo, targets []*fanout.Target, opts Options, managed []pr.ManagedRepo) map[string]string {
		t.Helper()
		rs, err := assignRoles(newRunInput(repo, targets, opts), repo.Fleet(), managed)
		require.NoError(t, err)
		out := map[string]string{}
		for _, r := range rs {
			out[r.target().Repo] = fmt.Sprintf("%T", r)
		}
		return out
	}
	assert.Equal(t, map[string]string{
		"cluster-a": "reconcile.contentTarget", "cluster-b": "reconcile.contentTarget", "cluster-c": "reconcile.contentTarget",
		"cluster-gone": "reconcile.tombstone", "control": "reconcile.accessEntry",
	}, roles(repo, fl.targets(), Options{}, managed), "a full run")
	assert.Equal(t, map[string]string{"cluster-b": "reconcile.contentTarget"},
		roles(repo, fl.targets(), Options{Only: []string{"Cluster-B"}}, nil), "a run limited to one repo (case as on GitHub)")

	waves := fl.repo()
	waves.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all"}}
	assert.Equal(t, map[string]string{
		"cluster-a": "reconcile.gateObserver", "cluster-b": "reconcile.contentTarget", "cluster-c": "reconcile.gateObserver",
	}, roles(waves, fl.targets(), Options{Only: []string{"cluster-b"}}, nil), "with waves the gate sees every cluster")

	got := roles(repo, fl.targets(), Options{Shard: Shard{Index: 0, Count: 2}}, managed)
	for r, role := range got {
		assert.True(t, Shard{Index: 0, Count: 2}.Owns(r), "%s (%s) is another shard's", r, role)
	}

	other := fl.targets()
	other[0].Owner = "evil"
	_, err := assignRoles(newRunInput(repo, other, Options{}), repo.Fleet(), nil)
	assert.ErrorContains(t, err, "target evil/cluster-a is not owned by the platform owner acme")
	twice := append(fl.targets(), fl.targets()[0])
	_, err = assignRoles(newRunInput(repo, twice, Options{}), repo.Fleet(), nil)
	assert.ErrorContains(t, err, "two targets render the same repo acme/cluster-a")
	repo.Platform.Spec.Repos.Control = "cluster-a"
	_, err = assignRoles(newRunInput(repo, fl.targets(), Options{}), repo.Fleet(), nil)
	assert.ErrorContains(t, err, "the control repo acme/cluster-a is also a target repo")
}

// TestResultOutcome: a result's class comes from its error, or from its action when it has
// none, and decides its word, its deferral and the run's exit code.
func TestResultOutcome(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	budget := report.Classify(fmt.Errorf("acme/cluster-b: %w", pr.ErrDeferred), report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted, RetryAt: at})
	for _, tc := range []struct {
		name string
		res  Result
		want report.Outcome
		word string
	}{
		{"done", Result{Action: pr.ActionOpen}, report.Done, "open"},
		{"archived", Result{Action: pr.ActionNoop, Skipped: SkippedArchived}, report.Outcome{Class: report.ClassDone, Reason: report.ReasonArchived}, "skipped"},
		{"blocked by a human", Result{Action: pr.ActionBlocked}, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonHumanCommitOnBranch}, "blocked"},
		{"the write budget", Result{Action: pr.ActionOpen, Err: budget}, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted, RetryAt: at}, "deferred"},
		{"held", Result{Action: pr.ActionOpen, Err: fmt.Errorf("x: %w: wave a", ErrHeld)}, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout}, "deferred"},
		{"an unclassified failure", Result{Action: pr.ActionOpen, Err: errors.New("boom")}, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError}, "failed"},
	} {
		assert.Equal(t, tc.want, tc.res.Outcome(), tc.name)
		assert.Equal(t, tc.word, tc.res.Word(), tc.name)
		assert.Equal(t, tc.want.Class == report.ClassDeferred, tc.res.Deferred(), tc.name)
		assert.Equal(t, tc.want.Class, tc.res.Row().Outcome.Class, tc.name)
	}

	rep := func(results ...Result) *Report { return &Report{Results: results} }
	open, noop := Result{Action: pr.ActionOpen}, Result{Action: pr.ActionNoop}
	blocked, failed := Result{Action: pr.ActionBlocked}, Result{Action: pr.ActionOpen, Err: errors.New("boom")}
	deferred := Result{Action: pr.ActionOpen, Err: budget}
	for _, tc := range []struct {
		name        string
		rep         *Report
		plan, apply int
	}{
		{"nothing to do", rep(noop), ExitNoChanges, ExitNoChanges},
		{"changes", rep(noop, open), ExitChanges, ExitNoChanges},
		{"deferred", rep(noop, deferred), ExitChanges, ExitChanges},
		{"blocked first", rep(open, deferred, blocked), ExitBlocked, ExitBlocked},
		{"a failed plan", rep(noop, failed), ExitError, ExitError},
		{"blocked before a retry", rep(failed, blocked), ExitBlocked, ExitBlocked},
	} {
		assert.Equal(t, tc.plan, tc.rep.ExitCode(false), "plan: %s", tc.name)
		assert.Equal(t, tc.apply, tc.rep.ExitCode(true), "apply: %s", tc.name)
	}
	assert.Equal(t, at, rep(noop, deferred, failed).RetryAt())
	assert.True(t, rep(noop, failed).RetryAt().IsZero())
}

// TestHeldRepoRetriesWhenTheSoakEnds: a cluster the rollout holds while the wave before it
// soaks is deferred until the soak ends, the time alone changes the verdict at.
func TestHeldRepoRetriesWhenTheSoakEnds(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	rep := r.apply()
	o := byRepo(rep)["cluster-c02"].Outcome()
	assert.Equal(t, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout}, o, "waiting for a merge: no time is known")

	r.mergeAndReport("cluster-c01", "success")
	soakEnd := r.srv.Now().Add(time.Hour)
	rep = r.apply()
	o = byRepo(rep)["cluster-c02"].Outcome()
	assert.Equal(t, report.ClassDeferred, o.Class)
	assert.Equal(t, report.ReasonHeldByRollout, o.Reason)
	assert.Equal(t, soakEnd.UTC(), o.RetryAt.UTC(), "deferred until the canary's soak ends")
	assert.Equal(t, soakEnd.UTC(), rep.RetryAt().UTC())
}
