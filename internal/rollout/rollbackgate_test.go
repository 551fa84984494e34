package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestGateRecognisesARolledBackFailure: a cluster whose newest pull request rolled revision
// rev1 back, and whose desired tree is again the tree that failed there, makes the gate hold
// the whole rollout as rolled back; a revision that renders another tree there is a new
// rollout.
func TestGateRecognisesARolledBackFailure(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rollback := pr.RolloutPR{Number: 3, State: pr.StateMerged, Source: "rev0", MergedAt: now.Add(-time.Hour), RollbackOf: "rev1", FailedTree: "failed-tree"}
	clusters := []Cluster{{Name: "c1", Repo: "cluster-c1", PR: rollback, Found: true,
		Decision: &pr.Decision{Action: pr.ActionRolledBack, Tree: "failed-tree"}}}
	assert.Equal(t, &Failure{Revision: "rev1", Trees: map[string]string{"cluster-c1": "failed-tree"}}, rolledBackFailure(clusters))

	clusters[0].Decision = &pr.Decision{Action: pr.ActionOpen, Tree: "new-tree"}
	assert.Nil(t, rolledBackFailure(clusters), "a revision rendering another tree is a new rollout")

	clusters[0].Decision = nil
	assert.Nil(t, rolledBackFailure(clusters), "a cluster the run did not plan proves nothing")
}

// TestPlanRollbackWhere: a rollback by hand restores every repo whose newest merge left the
// content named, whatever revision carried it, and skips a repo already rolled back.
func TestPlanRollbackWhere(t *testing.T) {
	t.Parallel()
	h := []History{
		{Repo: "a", Merges: []Merge{{Revision: "r0", Tree: "t0", Health: HealthSuccess}, {Revision: "r1", Tree: "bad-a"}}},
		{Repo: "b", Merges: []Merge{{Revision: "r0", Tree: "t0b", Health: HealthSuccess}, {Revision: "r2", Tree: "bad-b"}}},
		{Repo: "c", Merges: []Merge{{Revision: "r0", Tree: "t0c", Health: HealthSuccess}, {Revision: "r2", Tree: "bad-c"}, {Revision: "r0", Tree: "t0c", Rollback: true, RollbackOf: "r2"}}},
	}
	bad := map[string]string{"a": "bad-a", "b": "bad-b", "c": "bad-c"}
	plan := PlanRollbackWhere("rec", func(repo string, m Merge) bool { return bad[repo] == m.Tree }, h)
	require.Len(t, plan.Restores, 2)
	assert.Equal(t, "a", plan.Restores[0].Repo)
	assert.Equal(t, "t0", plan.Restores[0].To.Tree)
	assert.Equal(t, "b", plan.Restores[1].Repo)
	assert.Equal(t, "bad-c", plan.Failed.Trees["c"], "a repo already rolled back keeps its failed tree marked")
	assert.Empty(t, plan.Stuck)
}
