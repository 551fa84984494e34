package status

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestStateFollowsTheClass: a row's state and what it waits on are read from the result's
// class and reason (report.Class.Badge), whichever error carried them.
func TestStateFollowsTheClass(t *testing.T) {
	t.Parallel()
	reset := now.Add(42 * time.Minute)
	classified := func(msg string, o report.Outcome) error { return report.Classify(errors.New(msg), o) }
	for _, tc := range []struct {
		name    string
		res     reconcile.Result
		state   State
		waiting string
		summary string
	}{
		{"rate limited until the reset", reconcile.Result{Action: pr.ActionUpdate,
			Err: classified("GitHub rate limit", report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonRateLimited, RetryAt: reset})},
			StateDeferred, WaitBudget, "deferred to the next run: GitHub rate limit until " + reset.Format(time.RFC3339)},
		{"the write budget", reconcile.Result{Action: pr.ActionOpen, Err: fmt.Errorf("x: %w", pr.ErrDeferred)},
			StateDeferred, WaitBudget, "deferred to the next run: write budget exhausted"},
		{"held by the rollout", reconcile.Result{Action: pr.ActionOpen, Err: fmt.Errorf("acme/cluster-x: %w: wave a is not done", reconcile.ErrHeld)},
			StateDeferred, WaitRollout, "deferred to the next run: acme/cluster-x: held by the rollout: wave a is not done"},
		{"a human's commit", reconcile.Result{Action: pr.ActionBlocked, Reason: "commit abc on fleetbot/sync was not made by fleetbot"},
			StateBlocked, WaitHumanEdit, "blocked: commit abc on fleetbot/sync was not made by fleetbot"},
		{"a permission GitHub refuses", reconcile.Result{Action: pr.ActionOpen,
			Err: classified("creating tree in acme/cluster-x: 403 Resource not accessible by integration", report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden})},
			StateBlocked, "", "blocked: creating tree in acme/cluster-x: 403 Resource not accessible by integration"},
		{"retryable", reconcile.Result{Action: pr.ActionOpen, Err: errors.New("502 bad gateway")}, StateFailed, "", "failed: 502 bad gateway"},
		{"invalid input", reconcile.Result{Action: pr.ActionOpen,
			Err: classified("422 Validation Failed", report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonRejected})}, StateFailed, "", "failed: 422 Validation Failed"},
		{"archived", reconcile.Result{Action: pr.ActionNoop, Skipped: reconcile.SkippedArchived}, StateSkipped, "", "skipped (archived)"},
	} {
		tc.res.Repo, tc.res.Kind, tc.res.Name = "acme/cluster-x", fanout.KindCluster, "x"
		f := Build(Input{Source: source, Now: now, Entries: []Entry{{Result: tc.res, At: now, Applied: true}}}, Options{})
		require.Len(t, f.Repos, 1, tc.name)
		r := f.Repos[0]
		assert.Equal(t, tc.state, r.State, tc.name)
		assert.Equal(t, tc.waiting, r.WaitingOn, tc.name)
		assert.Equal(t, tc.summary, r.Summary, tc.name)
	}
	for _, c := range report.Classes {
		if b := c.Badge(); b != "" {
			assert.Contains(t, States, State(b), "the badge of %s is a state", c)
		}
	}
}
