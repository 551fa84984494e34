package reconcile

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// waveRig is a five-cluster fleet on the fake GitHub, converged on v1, whose control repo
// declares three waves: canary (c01, soak 1h), eu (c02, c03, maxParallel 1), and the rest
// (c04, c05). Flux is played by the test: it posts commit statuses on merge commits.
type waveRig struct {
	t     *testing.T
	srv   *githubtest.Server
	human *gh.Client
	forge Forge
	fl    fleet
	rev   string
	// ws puts c01 and c04 in workspace payments, whose repo renders v per cluster.
	ws bool
	// autoEU sets merge: auto on wave eu (and lets its repos auto-merge).
	autoEU bool
	// metal, when set, is the value each cluster's platform/metallb/metallb.yaml renders
	// (a component directory); metalWaves gives component metallb its own waves.
	metal      fleet
	metalWaves []control.Wave
	// paused pauses the rollout (the control repo's rollout/paused); healthTimeout is
	// spec.rollout.healthTimeout.
	paused        *control.Pause
	healthTimeout string
	// onFailure is spec.rollout.onFailure.
	onFailure string
	// autoCanary sets merge: auto on wave canary (and lets c01 auto-merge); windows are
	// spec.rollout.windows.
	autoCanary bool
	windows    []control.ChangeWindow
}

func newWaveRig(t *testing.T, ws ...bool) *waveRig {
	t.Helper()
	return newWaveRigWith(t, func(r *waveRig) { r.ws = len(ws) > 0 && ws[0] })
}

// newWaveRigWith is newWaveRig with set applied to the rig before it converges on v1.
func newWaveRigWith(t *testing.T, set func(*waveRig)) *waveRig {
	t.Helper()
	fl := fleet{"c01": "v1", "c02": "v1", "c03": "v1", "c04": "v1", "c05": "v1"}
	// A frozen clock, moved only by AdvanceClock (soaks, timeouts). It starts in the past, so
	// the client, on wall time, takes every installation token for expired and fetches a new
	// one per request (hence token requests, and no expiry when the fake clock advances).
	srv := githubtest.NewServer(t, githubtest.WithManualClock(), githubtest.WithStartTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	srv.CreateTeam("acme", "platform")
	for _, n := range fl.names() {
		srv.CreateTeam("acme", n+"-admins")
	}
	r := &waveRig{t: t, srv: srv, human: srv.Client(), fl: fl, rev: "v1"}
	set(r)
	r.restart()
	// Converge on v1 without waves: every repo created, its pull request merged.
	rep, err := Apply(context.Background(), r.forge, r.control(false), r.targets(), r.opts())
	require.NoError(t, err)
	for _, res := range rep.Results {
		r.merge(res.Repo[len("acme/"):], res.PR)
	}
	return r
}

// restart builds a new forge with an empty cache: a service restarted mid-rollout.
func (r *waveRig) restart() {
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: r.srv.APIURL(), AppID: r.srv.AppID(), PrivateKey: r.srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1},
	})
	require.NoError(r.t, err)
	r.forge = ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: filepath.Join(r.t.TempDir(), "cache")})
}

func (r *waveRig) control(waves bool) *control.Repo {
	repo := r.fl.repo()
	repo.Revision = r.rev
	labels := map[string]string{"c01": "canary", "c02": "eu", "c03": "eu"}
	for _, c := range repo.Clusters {
		if l, ok := labels[c.Metadata.Name]; ok {
			c.Metadata.Labels = map[string]string{"ring": l}
		}
	}
	if r.ws {
		repo.Workspaces = []*control.Workspace{{Metadata: control.Meta{Name: "payments"}}}
		for _, c := range repo.Clusters {
			if c.Metadata.Name == "c01" || c.Metadata.Name == "c04" {
				c.Spec.Workspace = "payments"
			}
		}
	}
	if waves {
		repo.Platform.Spec.Rollout.Waves = []control.Wave{
			{Name: "canary", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"ring": "canary"}}, Soak: "1h"},
			{Name: "eu", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"ring": "eu"}}, MaxParallel: 1},
		}
		if r.autoEU {
			repo.Platform.Spec.Rollout.Waves[1].Merge = control.MergeAuto
		}
		if r.autoCanary {
			repo.Platform.Spec.Rollout.Waves[0].Merge = control.MergeAuto
		}
		repo.Platform.Spec.Rollout.Windows = r.windows
		repo.Platform.Spec.Rollout.HealthTimeout = r.healthTimeout
		repo.Platform.Spec.Rollout.OnFailure = r.onFailure
		repo.Paused = r.paused
	}
	if r.metal != nil {
		comp := control.Component{App: "metallb", ClusterSelector: &control.Selector{}}
		if waves && r.metalWaves != nil {
			comp.Rollout = &control.ComponentRollout{Waves: r.metalWaves}
		}
		repo.Platform.Spec.Components = append(repo.Platform.Spec.Components, comp)
	}
	return repo
}

func (r *waveRig) opts() Options {
	return Options{Concurrency: 2, Source: r.rev, Now: r.srv.Now}
}

// change moves every cluster to value v at control revision v.
func (r *waveRig) change(v string) {
	for n := range r.fl {
		r.fl[n] = v
	}
	r.rev = v
}

// targets renders the fleet, and the workspace repo when r.ws.
func (r *waveRig) targets() []*fanout.Target {
	ts := r.fl.targets()
	for _, tg := range ts {
		tg.Access.AllowAutoMerge = r.autoEU && (tg.Name == "c02" || tg.Name == "c03") || r.autoCanary && tg.Name == "c01"
		if r.metal != nil {
			tg.Files["platform/metallb/metallb.yaml"] = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: metallb\n  namespace: metallb-system\ndata:\n  value: \"" + r.metal[tg.Name] + "\"\n")
		}
	}
	if r.ws {
		ts = append(ts, &fanout.Target{
			Kind: fanout.KindWorkspace, Name: "payments", Owner: "acme", Repo: "workspace-payments", DefaultBranch: "main", Visibility: "private",
			Files: map[string][]byte{
				"README.md":          []byte("# workspace-payments\n"),
				".github/CODEOWNERS": []byte("* @acme/platform\n"),
				"clusters/c01/fleetbot/kustomization.yaml": []byte("resources: []\n# " + r.fl["c01"] + "\n"),
				"clusters/c04/fleetbot/kustomization.yaml": []byte("resources: []\n# " + r.fl["c04"] + "\n"),
			},
			Access:    policy.WorkspaceRepoAccess([]string{"platform"}, nil, "main"),
			Reviewers: []string{"platform"},
		})
	}
	return ts
}

func (r *waveRig) apply() *Report {
	r.t.Helper()
	rep, err := Apply(context.Background(), r.forge, r.control(true), r.targets(), r.opts())
	require.NoError(r.t, err)
	return rep
}

func (r *waveRig) merge(repo string, n int) {
	r.t.Helper()
	_, _, err := r.human.PullRequests.Merge(context.Background(), "acme", repo, n, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(r.t, err, repo)
}

// open returns the open fleetbot pull request of repo, or nil.
func (r *waveRig) open(repo string) *gh.PullRequest {
	for _, p := range r.srv.Pulls("acme", repo) {
		if p.GetState() == "open" {
			return p
		}
	}
	return nil
}

// mergeAndReport merges repo's open pull request and posts Flux's verdict on its merge commit
// (state "" posts nothing).
func (r *waveRig) mergeAndReport(repo, state string) {
	r.t.Helper()
	p := r.open(repo)
	require.NotNil(r.t, p, "%s has no open pull request", repo)
	r.merge(repo, p.GetNumber())
	if state == "" {
		return
	}
	var sha string
	for _, q := range r.srv.Pulls("acme", repo) {
		if q.GetNumber() == p.GetNumber() {
			sha = q.GetMergeCommitSHA()
		}
	}
	require.NotEmpty(r.t, sha)
	for _, ctx := range []string{"kustomization/platform/0c9c2e41", "kustomization/apps/7a1b2c3d"} {
		_, _, err := r.human.Repositories.CreateStatus(context.Background(), "acme", repo, sha, &gh.RepoStatus{State: gh.String(state), Context: gh.String(ctx)})
		require.NoError(r.t, err)
	}
}

// opened lists the cluster repos with an open pull request.
func (r *waveRig) opened() []string {
	var out []string
	for _, n := range r.fl.names() {
		if r.open("cluster-"+n) != nil {
			out = append(out, "cluster-"+n)
		}
	}
	return out
}

func heldWhy(t *testing.T, rep *Report, repo string) string {
	t.Helper()
	res := byRepo(rep)[repo]
	require.True(t, res.Deferred(), "%s is not held: %s", repo, res.Word())
	require.True(t, errors.Is(res.Err, ErrHeld), "%s: %v", repo, res.Err)
	return res.Err.Error()
}

// TestRolloutThreeWaves drives a change through canary (soak 1h), eu (maxParallel 1) and the
// rest: each wave starts only when the one before is merged, reported healthy by Flux's
// commit statuses and soaked; a forge restarted mid-rollout continues from what GitHub shows.
func TestRolloutThreeWaves(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")

	rep := r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done (0 of 1 changed clusters healthy)")
	assert.Equal(t, "deferred", byRepo(rep)["cluster-c05"].Word())
	require.NotNil(t, rep.Rollout)
	assert.Equal(t, []string{"c01"}, rep.Rollout.Admitted)

	// Merged, no verdict yet: nothing moves.
	r.mergeAndReport("cluster-c01", "")
	rep = r.apply()
	assert.Empty(t, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done")

	// Healthy: the canary soaks for an hour.
	r.restart()
	require.NoError(t, postStatuses(r, "cluster-c01", "success"))
	soakEnd := r.srv.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	rep = r.apply()
	assert.Empty(t, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary soaks until "+soakEnd)

	// Soaked: eu opens one pull request at a time.
	r.srv.AdvanceClock(time.Hour)
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c02"}, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c03"), "maxParallel 1")
	assert.Contains(t, heldWhy(t, rep, "cluster-c04"), "wave eu is not done")
	// Re-run with nothing new: eu's open pull request (a no-op now) still counts.
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c02"}, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c03"), "maxParallel 1")

	r.mergeAndReport("cluster-c02", "success")
	r.apply()
	assert.Equal(t, []string{"cluster-c03"}, r.opened())

	r.restart()
	r.mergeAndReport("cluster-c03", "success")
	r.apply()
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened())

	r.mergeAndReport("cluster-c04", "success")
	r.mergeAndReport("cluster-c05", "success")
	rep = r.apply()
	assert.Empty(t, r.opened())
	assert.Empty(t, rep.Deferred())
	assert.True(t, rep.Rollout.Done)
	for _, w := range rep.Rollout.Waves {
		assert.Equal(t, rollout.WaveDone, w.State, w.Name)
	}
}

// postStatuses posts Flux's verdict on the merge commit of repo's newest merged pull request.
func postStatuses(r *waveRig, repo, state string) error {
	var sha string
	for _, p := range r.srv.Pulls("acme", repo) {
		if p.GetMerged() {
			sha = p.GetMergeCommitSHA()
		}
	}
	if sha == "" {
		return errors.New(repo + " has no merged pull request")
	}
	for _, ctx := range []string{"kustomization/platform/0c9c2e41", "kustomization/apps/7a1b2c3d"} {
		if _, _, err := r.human.Repositories.CreateStatus(context.Background(), "acme", repo, sha, &gh.RepoStatus{State: gh.String(state), Context: gh.String(ctx)}); err != nil {
			return err
		}
	}
	return nil
}

// TestRolloutHaltAndSupersede: Flux's failure on the canary halts the rollout (no later wave
// gets a pull request, whatever the time); a status of another context does not count; a new
// control-repo revision supersedes the halted one and starts again from the canary.
func TestRolloutHaltAndSupersede(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "failure")
	// A status of another context (a CI job) does not make the cluster healthy.
	sha := r.srv.Pulls("acme", "cluster-c01")[1].GetMergeCommitSHA()
	_, _, err := r.human.Repositories.CreateStatus(context.Background(), "acme", "cluster-c01", sha, &gh.RepoStatus{State: gh.String("success"), Context: gh.String("ci/lint")})
	require.NoError(t, err)
	r.srv.AdvanceClock(24 * time.Hour)

	rep := r.apply()
	assert.Empty(t, r.opened())
	require.NotNil(t, rep.Rollout.Halted)
	assert.Equal(t, "c01", rep.Rollout.Halted.Cluster)
	assert.Contains(t, rep.Rollout.Halted.Reason, "Flux reported a failure for the merge of #2")
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary halted")

	// The fix, v3: the canary gets a new pull request; the others still wait for it.
	r.change("v3")
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened())
	assert.Nil(t, rep.Rollout.Halted)
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done")
}

// TestRolloutTimeout: a merge Flux never reports on halts the rollout after the health timeout.
func TestRolloutTimeout(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "")
	r.srv.AdvanceClock(rollout.DefaultHealthTimeout)
	rep := r.apply()
	require.NotNil(t, rep.Rollout.Halted)
	assert.Contains(t, rep.Rollout.Halted.Reason, "no healthy status from Flux within 30m0s")
	assert.Empty(t, r.opened())
}

// TestRolloutSupersedeMidWave: a new revision while eu's pull request is open updates that
// pull request in place (same number, new source) and sends the canary the new revision first.
func TestRolloutSupersedeMidWave(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "success")
	r.srv.AdvanceClock(time.Hour)
	r.apply()
	before := r.open("cluster-c02")
	require.NotNil(t, before)

	r.change("v3")
	rep := r.apply()
	assert.Equal(t, []string{"cluster-c01", "cluster-c02"}, r.opened())
	after := r.open("cluster-c02")
	assert.Equal(t, before.GetNumber(), after.GetNumber(), "updated in place")
	assert.Equal(t, "v3", pr.SourceOf(after.GetBody()))
	assert.Contains(t, heldWhy(t, rep, "cluster-c03"), "wave canary is not done")
}

// TestNoWavesNoGate: without spec.rollout.waves every changed repo gets its pull request at
// once, as before.
func TestNoWavesNoGate(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	rep, err := Apply(context.Background(), r.forge, r.control(false), r.fl.targets(), r.opts())
	require.NoError(t, err)
	assert.Nil(t, rep.Rollout)
	assert.Len(t, r.opened(), 5)
}

// TestRolloutLocalForge: the local forge answers the gate from pulls.json and the statuses a
// test (standing in for Flux) sets with SetStatus; a status on another commit does not count.
func TestRolloutLocalForge(t *testing.T) {
	t.Parallel()
	requireGit(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := func() time.Time { return now }
	f, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return clk() }, LockTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	r := &waveRig{t: t, fl: fleet{"c01": "v1", "c02": "v1", "c03": "v1", "c04": "v1", "c05": "v1"}, rev: "v1"}
	ctx := context.Background()
	opts := Options{Concurrency: 2, Now: clk}
	run := func(waves bool) *Report {
		t.Helper()
		o := opts
		o.Source = r.rev
		rep, err := Apply(ctx, f, r.control(waves), r.fl.targets(), o)
		require.NoError(t, err)
		return rep
	}
	opened := func() []string {
		var out []string
		for _, n := range r.fl.names() {
			ps, err := f.PullRequests("acme", "cluster-"+n)
			require.NoError(t, err)
			for _, p := range ps {
				if p.State == pr.StateOpen {
					out = append(out, "cluster-"+n)
				}
			}
		}
		return out
	}
	mergeOpen := func(repo string) string {
		ps, err := f.PullRequests("acme", repo)
		require.NoError(t, err)
		for _, p := range ps {
			if p.State == pr.StateOpen {
				require.NoError(t, f.Merge(ctx, "acme", repo, p.Number, local.MergeCommit))
			}
		}
		refs, err := f.Refs("acme", repo)
		require.NoError(t, err)
		return refs["main"]
	}
	for _, res := range run(false).Results {
		mergeOpen(res.Repo[len("acme/"):])
	}
	r.change("v2")
	rep := run(true)
	assert.Equal(t, []string{"cluster-c01"}, opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done")

	head := mergeOpen("cluster-c01")
	require.NoError(t, f.SetStatus("acme", "cluster-c01", "0000000000000000000000000000000000000000", "kustomization/platform/1", "success"))
	run(true)
	assert.Empty(t, opened(), "a status on another commit does not count")
	require.NoError(t, f.SetStatus("acme", "cluster-c01", head, "kustomization/platform/1", "success"))
	rep = run(true)
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary soaks until 2026-03-01T13:00:00Z")
	now = now.Add(time.Hour)
	run(true)
	assert.Equal(t, []string{"cluster-c02"}, opened())

	assert.ErrorContains(t, f.SetStatus("acme", "cluster-c01", head, "kustomization/platform/1", "green"), `state "green"`)
}

// TestRolloutWorkspaceGoesLast: a workspace repo serves every cluster of the workspace at once,
// so its change waits until none of them is held: here until c04 (the last wave) starts.
func TestRolloutWorkspaceGoesLast(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t, true)
	r.change("v2")
	rep := r.apply()
	assert.Contains(t, heldWhy(t, rep, "workspace-payments"), "the workspace's change goes with the last wave of its clusters; waiting for c04")
	r.mergeAndReport("cluster-c01", "success")
	r.srv.AdvanceClock(time.Hour)
	r.apply()
	r.mergeAndReport("cluster-c02", "success")
	r.apply()
	r.mergeAndReport("cluster-c03", "success")
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened())
	assert.False(t, byRepo(rep)["workspace-payments"].Deferred())
	assert.NotNil(t, r.open("workspace-payments"))
}

// TestRolloutOnlyRunSeesTheFleet: a run limited to one repo (a webhook's) still weighs every
// cluster of its wave: c03 stays held while eu's c02 is open (maxParallel 1), and nothing
// outside the run is reported.
func TestRolloutOnlyRunSeesTheFleet(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "success")
	r.srv.AdvanceClock(time.Hour)
	r.apply()
	require.Equal(t, []string{"cluster-c02"}, r.opened())
	o := r.opts()
	o.Only = []string{"cluster-c03"}
	rep, err := Apply(context.Background(), r.forge, r.control(true), r.targets(), o)
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	assert.Contains(t, heldWhy(t, rep, "cluster-c03"), "maxParallel 1")
	assert.Equal(t, []string{"cluster-c02"}, r.opened())
}

// TestRolloutShards: two replicas, each applying only the repos it owns, together take the
// rollout through its waves exactly as one would: a revision that leaves the canary unchanged
// (its last change healthy and soaked) does not stall the replicas that do not own it.
func TestRolloutShards(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	// v2 changes every cluster but the canary c01.
	r.rev = "v2"
	for _, n := range []string{"c02", "c03", "c04", "c05"} {
		r.fl[n] = "v2"
	}
	applyShards := func() {
		for i := range 2 {
			o := r.opts()
			o.Shard = Shard{Index: i, Count: 2}
			_, err := Apply(context.Background(), r.forge, r.control(true), r.targets(), o)
			require.NoError(t, err)
		}
	}
	// The canary's last change (v1) is healthy and soaked.
	require.NoError(t, postStatuses(r, "cluster-c01", "success"))
	r.srv.AdvanceClock(time.Hour)
	applyShards()
	assert.Equal(t, []string{"cluster-c02"}, r.opened(), "canary unchanged: eu starts at once, one at a time")
	r.mergeAndReport("cluster-c02", "success")
	applyShards()
	assert.Equal(t, []string{"cluster-c03"}, r.opened())
	r.mergeAndReport("cluster-c03", "success")
	applyShards()
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened())
}

// TestRolloutWaveMerge: a wave's merge mode applies to its pull requests: eu's (merge: auto)
// get GitHub's auto-merge, the canary's (the platform's manual) do not.
func TestRolloutWaveMerge(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.autoEU = true
	r.change("v2")
	r.apply()
	c01 := r.open("cluster-c01")
	require.NotNil(t, c01)
	assert.Nil(t, c01.AutoMerge, "the canary is merged by hand")
	r.mergeAndReport("cluster-c01", "success")
	r.srv.AdvanceClock(time.Hour)
	rep := r.apply()
	res := byRepo(rep)["cluster-c02"]
	require.NoError(t, res.Err)
	var c02 *gh.PullRequest
	for _, p := range r.srv.Pulls("acme", "cluster-c02") {
		if p.GetNumber() == res.PR {
			c02 = p
		}
	}
	require.NotNil(t, c02)
	assert.True(t, c02.AutoMerge != nil || c02.GetMerged(), "eu's pull request merges automatically")
}

// TestRolloutHealthOnLaterHead: a cluster admin's commit lands on the default branch after the
// merge and before Flux reconciles; Flux reports on that newer head, and the wave counts it.
func TestRolloutHealthOnLaterHead(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "")
	head := r.srv.Commit("acme", "cluster-c01", "main", "apps", map[string]string{"apps/x.yaml": "x: 1\n"})
	_, _, err := r.human.Repositories.CreateStatus(context.Background(), "acme", "cluster-c01", head, &gh.RepoStatus{State: gh.String("success"), Context: gh.String("kustomization/platform/0c9c2e41")})
	require.NoError(t, err)
	rep := r.apply()
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary soaks until")
}

// TestRolloutUnrelatedCommitKeepsTheGate: a control-repo commit that leaves the clusters alone,
// landing while the canary waits for Flux, does not let the canary skip its health check: its
// merged pull request carried exactly the tree the new revision renders.
func TestRolloutUnrelatedCommitKeepsTheGate(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "")
	r.rev = "v2-docs" // same render
	rep := r.apply()
	assert.Empty(t, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done (0 of 1 changed clusters healthy)")
	require.NoError(t, postStatuses(r, "cluster-c01", "success"))
	rep = r.apply()
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary soaks until")
}

// noRollout is a forge that declares no rollout reader.
type noRollout struct{ Forge }

func (n noRollout) Capabilities() pr.Capabilities {
	c := n.Forge.Capabilities()
	c.Rollout = nil
	return c
}

// TestRolloutNeedsAReader: waves on a forge that cannot read merges and statuses are an error
// before anything is written, not a rollout that opens everything.
func TestRolloutNeedsAReader(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.srv.ResetLog()
	_, err := Apply(context.Background(), noRollout{r.forge}, r.control(true), r.targets(), r.opts())
	require.ErrorContains(t, err, "platform spec.rollout.waves: this forge cannot read pull request merges and commit statuses")
	for _, q := range r.srv.Requests() {
		if q.Class != githubtest.Read {
			assert.Equal(t, "POST /app/installations/{id}/access_tokens", q.Route, "nothing written")
		}
	}
	assert.Empty(t, r.opened())
}
