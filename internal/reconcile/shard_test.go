package reconcile

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShardOwnsEachRepoOnce(t *testing.T) {
	t.Parallel()
	repos := make([]string, 3000)
	for i := range repos {
		repos[i] = fmt.Sprintf("cluster-prod-eu-%d", i)
	}
	for _, n := range []int{2, 3, 7} {
		per := make([]int, n)
		for _, r := range repos {
			owners := 0
			for i := range n {
				if (Shard{Index: i, Count: n}).Owns(r) {
					owners++
					per[i]++
				}
			}
			require.Equal(t, 1, owners, "%s with %d replicas", r, n)
		}
		for i, c := range per {
			assert.InDelta(t, len(repos)/n, c, float64(len(repos)/n)*0.15, "replica %d of %d owns a fair share", i, n)
		}
	}
	assert.True(t, Shard{}.Owns("anything"), "the zero Shard owns every repo")
	assert.Equal(t, ShardOf("Cluster-A", 5), ShardOf("cluster-a", 5), "repo names are case-insensitive")
}

func TestShardGrowthMovesFewRepos(t *testing.T) {
	t.Parallel()
	moved := 0
	for i := range 3000 {
		r := fmt.Sprintf("workspace-%d", i)
		before, after := ShardOf(r, 4), ShardOf(r, 5)
		if before != after {
			moved++
			assert.Equal(t, 4, after, "%s moves only to the new replica", r)
		}
	}
	assert.InDelta(t, 3000/5, moved, 3000/5*0.2, "about 1/5 of the repos move from 4 to 5 replicas")
}

func TestParseShard(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Shard{"": {}, "0/1": {Index: 0, Count: 1}, "2/5": {Index: 2, Count: 5}} {
		got, err := ParseShard(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"5/5", "-1/3", "1", "a/b", "1/3x", "1/0"} {
		_, err := ParseShard(bad)
		assert.Error(t, err, bad)
	}
}

// TestShardedRunsPartitionTheFleet applies a fleet as three replicas would:
// each creates only its own repos, together they create each repo once, and
// a removed cluster is handled by the one replica that owns its repo.
func TestShardedRunsPartitionTheFleet(t *testing.T) {
	t.Parallel()
	requireGit(t)
	f := openForge(t, t.TempDir())
	fl := tenClusters()
	seen := map[string]int{}
	for i := range 3 {
		rep, err := apply(t, f, fl, Options{Shard: Shard{Index: i, Count: 3}})
		require.NoError(t, err)
		for _, r := range rep.Results {
			seen[r.Repo]++
			assert.Equal(t, i, ShardOf(r.Repo[len("acme/"):], 3), "%s planned by its owner", r.Repo)
		}
	}
	require.Len(t, seen, len(fl))
	for repo, n := range seen {
		assert.Equal(t, 1, n, repo)
	}

	gone := "c04"
	delete(fl, gone)
	owner := ShardOf("cluster-"+gone, 3)
	for i := range 3 {
		rep, err := apply(t, f, fl, Options{Shard: Shard{Index: i, Count: 3}, AllowRemovals: true})
		require.NoError(t, err)
		removed := byRepo(rep)["cluster-"+gone]
		if i == owner {
			assert.Equal(t, "remove", string(removed.Action), "the owner removes it")
		} else {
			assert.Empty(t, removed.Repo, "replica %d leaves cluster-%s alone", i, gone)
		}
	}

	_, err := Plan(context.Background(), f, fl.repo(), fl.targets(), Options{Shard: Shard{Index: 3, Count: 3}})
	assert.Error(t, err, "an index outside the replica count is refused")
}

// livePartition owns the repos of a set; its key names the set's version.
type livePartition struct {
	owned map[string]bool
	key   string
}

func (p livePartition) Owns(repo string) bool { return p.owned[repo] }
func (p livePartition) Key() string           { return p.key }

// TestLiveShardIsFixedForARun: a live shard (replicas on Kubernetes Leases) plans the repos its
// partition owns when the run starts, even if ownership changes while it runs, and another
// partition's key makes the run's configuration digest (the baselines' salt) differ.
func TestLiveShardIsFixedForARun(t *testing.T) {
	t.Parallel()
	requireGit(t)
	f := openForge(t, t.TempDir())
	fl := tenClusters()
	current := livePartition{owned: map[string]bool{"cluster-c01": true, "cluster-c02": true}, key: "v1"}
	live := Shard{Live: func() Partition { return current }}
	fixed := live.Fixed()
	current = livePartition{owned: map[string]bool{"cluster-c03": true}, key: "v2"}
	assert.True(t, fixed.Owns("cluster-c01"), "a fixed shard keeps the partition it took")
	assert.False(t, live.Owns("cluster-c01"), "a live shard follows the membership")
	assert.True(t, live.Sharded())
	assert.Equal(t, "v2", live.Key())

	rep, err := apply(t, f, fl, Options{Shard: live})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, "acme/cluster-c03", rep.Results[0].Repo)

	a := configDigest(fl.repo(), Options{Shard: fixed}, "salt")
	b := configDigest(fl.repo(), Options{Shard: live.Fixed()}, "salt")
	assert.NotEqual(t, a, b, "a baseline recorded under another partition is not used")

	assert.ErrorContains(t, Shard{Index: 1, Count: 3, Live: live.Live}.Validate(), "static (--shard) or from Leases, not both")
}
