package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

func TestConcurrentApplies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fl := fleet{"a": "1", "b": "1", "c": "1"}
	var wg sync.WaitGroup
	reports := make([]*Report, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := local.Open(dir, local.Options{Now: clock(), LockTimeout: 20 * time.Second})
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			reports[i], errs[i] = Apply(context.Background(), f, fl.repo(), fl.targets(), Options{Concurrency: 3})
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	creates := 0
	for _, rep := range reports {
		for _, r := range rep.Results {
			switch r.Action {
			case pr.ActionCreate:
				creates++
			case pr.ActionNoop:
			default:
				t.Errorf("%s: unexpected %s", r.Repo, r.Action)
			}
		}
	}
	assert.Equal(t, 3, creates, "the second run waited and found nothing to do")

	f := openForge(t, dir)
	for _, repo := range repoNames(fl) {
		pulls, err := f.PullRequests("acme", repo)
		require.NoError(t, err)
		assert.Len(t, pulls, 1, "exactly one PR in %s", repo)
	}
}

func TestSecondApplyFailsClearlyWhenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	_, err := local.Open(dir, local.Options{LockTimeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, local.ErrLocked)
	assert.Contains(t, err.Error(), "another fleetbot apply holds the lock on "+f.Root())
}

func TestFailingRepoIsIsolated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := fleet{"a": "1", "b": "1", "c": "1"}
	_, err := apply(t, f, fl, Options{})
	require.NoError(t, err)

	// b: corrupt pulls.json; c: default branch deleted (other branches left).
	pulls := filepath.Join(dir, "acme", "cluster-b.pulls.json")
	garbage := []byte("[{\"number\": 1,,]")
	require.NoError(t, os.WriteFile(pulls, garbage, 0o644))
	require.NoError(t, f.ClosePR(context.Background(), "acme", "cluster-c", 1, ""))
	refs, err := f.Refs("acme", "cluster-c")
	require.NoError(t, err)
	require.NoError(t, f.SetBranch(context.Background(), "acme", "cluster-c", "develop", refs["main"], ""))
	require.NoError(t, deleteRef(dir, "cluster-c", "main"))

	fl["a"], fl["b"], fl["c"] = "2", "2", "2"
	rep, err := apply(t, f, fl, Options{})
	require.ErrorIs(t, err, ErrFailed)
	assert.Contains(t, err.Error(), "acme/cluster-b")
	assert.Contains(t, err.Error(), "acme/cluster-c")
	assert.NotContains(t, err.Error(), "acme/cluster-a")
	res := byRepo(rep)
	assert.Equal(t, pr.ActionUpdate, res["cluster-a"].Action, "the healthy repo is reconciled")
	require.Error(t, res["cluster-b"].Err)
	assert.ErrorIs(t, res["cluster-b"].Err, local.ErrCorruptPulls)
	assert.Contains(t, res["cluster-b"].Err.Error(), pulls, "error names the file")
	require.Error(t, res["cluster-c"].Err)
	assert.ErrorIs(t, res["cluster-c"].Err, pr.ErrDefaultBranchMissing)
	assert.Len(t, rep.Failed(), 2)

	got, err := os.ReadFile(pulls)
	require.NoError(t, err)
	assert.Equal(t, garbage, got, "nothing lost: the corrupt file is untouched")
}

func deleteRef(dir, repo, branch string) error {
	return os.Remove(filepath.Join(dir, "acme", repo+".git", "refs", "heads", branch))
}

func TestEmptyControlRepoNeverRemovesAll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := fleet{"a": "1"}
	_, err := apply(t, f, fl, Options{})
	require.NoError(t, err)
	before := dirState(t, dir)

	for name, run := range map[string]func() error{
		"no targets": func() error {
			_, err := Apply(context.Background(), f, fl.repo(), nil, Options{AllowRemovals: true})
			return err
		},
		"no platform": func() error {
			_, err := Apply(context.Background(), f, &control.Repo{}, fl.targets(), Options{})
			return err
		},
		"nil repo": func() error { _, err := Apply(context.Background(), f, nil, fl.targets(), Options{}); return err },
	} {
		err := run()
		assert.ErrorIs(t, err, ErrNoTargets, name)
	}
	assert.Equal(t, before, dirState(t, dir))
}

func TestPlanNeverWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := fleet{"a": "1", "b": "1"}
	before := dirState(t, dir)
	rep, err := Plan(context.Background(), f, fl.repo(), fl.targets(), Options{})
	require.NoError(t, err)
	assert.True(t, rep.Changed())
	assert.Equal(t, string(pr.ActionCreate), actions(rep)["cluster-a"])
	assert.Equal(t, before, dirState(t, dir))

	_, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	fl["a"] = "2"
	delete(fl, "b")
	before = dirState(t, dir)
	rep, err = Plan(context.Background(), f, fl.repo(), fl.targets(), Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cluster-a": "update", "cluster-b": "remove"}, actions(rep))
	assert.NoError(t, rep.Refused, "1 of 2 with the default 10%, rounded up, at least 1: allowed")
	assert.Equal(t, before, dirState(t, dir))
}

func TestRemovalGuardLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := fleet{"a": "1", "b": "1", "c": "1", "d": "1"}
	_, err := apply(t, f, fl, Options{})
	require.NoError(t, err)
	smaller := fleet{"a": "1"}
	for _, tc := range []struct {
		limit   intstr.IntOrString
		max     int
		refused bool
	}{
		{intstr.FromString("50%"), 2, true},
		{intstr.FromString("75%"), 3, false},
		{intstr.FromInt32(2), 2, true},
		{intstr.FromInt32(0), 1, true}, // at least 1
		{intstr.FromInt32(3), 3, false},
	} {
		repo := smaller.repo()
		repo.Platform.Spec.MaxRemovals = &tc.limit
		rep, err := Plan(context.Background(), f, repo, smaller.targets(), Options{})
		require.NoError(t, err)
		assert.Equal(t, 3, rep.Removals, tc.limit.String())
		assert.Equal(t, tc.max, rep.MaxRemovals, tc.limit.String())
		assert.Equal(t, tc.refused, rep.Refused != nil, tc.limit.String())
	}
}

// TestOnlyReconcilesTheListedRepos is the webhook service's drift reconcile:
// passing a subset of the fleet must not take the rest for removed.
func TestOnlyReconcilesTheListedRepos(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := openForge(t, dir)
	_, err := apply(t, f, fleet{"a": "1", "b": "1", "c": "1", "gone": "1"}, Options{})
	require.NoError(t, err)

	fl := fleet{"a": "1", "b": "2", "c": "2"} // b and c change, gone left the control repo
	rep, err := apply(t, f, fl, Options{Only: []string{"Cluster-B"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cluster-b": "update"}, actions(rep), "only b, matched case-insensitively")
	assert.Zero(t, rep.Removals)

	rep, err = Plan(context.Background(), f, fl.repo(), fl.targets(), Options{Only: []string{"cluster-gone"}})
	require.NoError(t, err)
	assert.Empty(t, rep.Results, "a removed repo is left to full runs and their removal guard")

	rep, err = Plan(context.Background(), f, fl.repo(), fl.targets(), Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"cluster-a": "noop", "cluster-b": "noop", "cluster-c": "update", "cluster-gone": "remove"}, actions(rep))
}

// TestRemovesComponent: only a component all of whose files go counts as a
// removal; the move of every component into its own directory (the layout
// of per-component Flux Kustomizations) removes none.
func TestRemovesComponent(t *testing.T) {
	t.Parallel()
	d := func(files ...pr.FileChange) *pr.Decision { return &pr.Decision{Files: files} }
	rm := func(p string) pr.FileChange { return pr.FileChange{Path: p, Op: pr.FileRemoved} }
	add := func(p string) pr.FileChange { return pr.FileChange{Path: p, Op: pr.FileAdded} }
	for _, tc := range []struct {
		name string
		d    *pr.Decision
		want bool
	}{
		{"upgrade to per-component directories", d(
			rm("platform/kustomization.yaml"), rm("platform/fleetbot.flux-tenancy.yaml"), rm("platform/metallb.yaml"), rm("platform/monitoring.yaml"),
			add("platform/fleetbot.flux-tenancy/kustomization.yaml"), add("platform/fleetbot.flux-tenancy/policy.yaml"),
			add("platform/metallb/kustomization.yaml"), add("platform/metallb/metallb.yaml"),
			add("platform/monitoring/kustomization.yaml"), add("platform/monitoring/monitoring.yaml"),
			pr.FileChange{Path: "flux/fleetbot.yaml", Op: pr.FileChanged}), false},
		{"component removed", d(rm("platform/metallb/kustomization.yaml"), rm("platform/metallb/metallb.yaml"), pr.FileChange{Path: "flux/fleetbot.yaml", Op: pr.FileChanged}), true},
		{"component removed while the layout moves", d(rm("platform/kustomization.yaml"), rm("platform/metallb.yaml"), rm("platform/monitoring.yaml"),
			add("platform/monitoring/kustomization.yaml"), add("platform/monitoring/monitoring.yaml")), true},
		{"component removed in the old layout", d(rm("platform/metallb.yaml"), pr.FileChange{Path: "platform/kustomization.yaml", Op: pr.FileChanged}), true},
		{"a value changes", d(pr.FileChange{Path: "platform/metallb/metallb.yaml", Op: pr.FileChanged}), false},
		{"apps file removed by hand", d(rm("apps/x.yaml")), false},
	} {
		assert.Equal(t, tc.want, removesComponent(tc.d), tc.name)
	}
}
