package serve_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// fakeServeClock is serve's clock in the rollout tests: the fake GitHub's manual clock (so the
// gate's now and the statuses' times agree) and wake-ups that fire only when Advance moves both
// clocks past them, each in its own goroutine.
type fakeServeClock struct {
	gh     *githubtest.Server
	mu     sync.Mutex
	timers []*fakeServeTimer
}

type fakeServeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *fakeServeClock) Now() time.Time { return c.gh.Now() }

func (c *fakeServeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeServeTimer{at: c.gh.Now().Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// pending lists when the wake-ups not yet fired are due.
func (c *fakeServeClock) pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t.at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// Advance moves the fake GitHub's clock by d and fires the wake-ups now due.
func (c *fakeServeClock) Advance(d time.Duration) {
	c.gh.AdvanceClock(d)
	now := c.gh.Now()
	c.mu.Lock()
	var due []*fakeServeTimer
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(now) {
			t.stopped = true
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		go t.f()
	}
}

// rolloutWaves is the example control repo's platform.yaml with three waves: canary
// (staging-eu-1, soak 1h), eu (prod-eu-1) and the rest (edge-1, prod-us-1). Declaring them
// changes every cluster repo (Flux's Provider and Alert), which is the change rolled out.
func rolloutWaves(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleControl, "platform.yaml"))
	require.NoError(t, err)
	return map[string]string{"platform.yaml": string(b) + `  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: staging}}
        soak: 1h
      - name: eu
        clusterSelector: {matchLabels: {env: prod, region: eu}}
`}
}

// rolloutEnv is serve with webhooks on a fake GitHub whose clock moves only by hand, converged
// on the example control repo (every first pull request merged), and a human who merges and
// plays Flux.
type rolloutEnv struct {
	*serveEnv
	clock   *fakeServeClock
	human   *gh.Client
	mu      sync.Mutex
	reasons map[string]int // apply jobs run, by reason
}

func startRolloutServe(t *testing.T) *rolloutEnv {
	t.Helper()
	return startRolloutServeWith(t, "")
}

// startRolloutServeWith is startRolloutServe with serve --health-keys healthKeys.
func startRolloutServeWith(t *testing.T, healthKeys string) *rolloutEnv {
	t.Helper()
	r := &rolloutEnv{reasons: map[string]int{}}
	// The fake's clock starts in the past: the client, on wall time, takes every installation
	// token for expired and fetches a fresh one, so advancing the fake clock expires none.
	// A long grace: a job still running when the test ends (a late status delivery's apply)
	// finishes instead of being cut mid-request.
	r.serveEnv = startServe(t, serveOptions{webhooks: true, grace: time.Minute, healthKeys: healthKeys,
		clock: func(s *githubtest.Server) jobqueue.Clock {
			r.clock = &fakeServeClock{gh: s}
			return r.clock
		},
		// No primary rate limit: the test polls the check runs through the API, and the
		// manual clock never opens a new hourly window on its own.
		ghOptions: []githubtest.Option{githubtest.WithManualClock(), githubtest.WithStartTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
			githubtest.WithPrimaryLimit(0)},
		beforeJob: func(j webhook.Job) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if j.Kind == webhook.KindApply { // a drift job's reason can read the same ("pull_request.closed")
				r.reasons[j.Reason]++
			}
		}})
	r.human = r.gh.Client()
	r.waitMetric(appliedOK, 1)
	r.idle()
	for _, repo := range r.targets {
		r.mergeOpen(repo)
	}
	r.idle()
	return r
}

// reason is how many apply jobs with this reason started.
func (r *rolloutEnv) reason(why string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reasons[why]
}

// open returns repo's open pull request, or nil.
func (r *rolloutEnv) open(repo string) *gh.PullRequest {
	for _, p := range r.gh.Pulls("acme", repo) {
		if p.GetState() == "open" {
			return p
		}
	}
	return nil
}

// mergeOpen merges repo's open pull request as a human and returns its merge commit.
func (r *rolloutEnv) mergeOpen(repo string) string {
	r.t.Helper()
	p := r.open(repo)
	require.NotNil(r.t, p, "%s has no open pull request", repo)
	res, _, err := r.human.PullRequests.Merge(context.Background(), "acme", repo, p.GetNumber(), "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(r.t, err, repo)
	return res.GetSHA()
}

// flux posts Flux's verdict on a cluster repo's commit, as notification-controller does.
func (r *rolloutEnv) flux(repo, sha, state string) {
	r.t.Helper()
	for _, ctx := range []string{"kustomization/flux-system/0c9c2e41", "kustomization/platform/7a1b2c3d"} {
		_, _, err := r.human.Repositories.CreateStatus(context.Background(), "acme", repo, sha, &gh.RepoStatus{State: gh.String(state), Context: gh.String(ctx)})
		require.NoError(r.t, err)
	}
}

// rolloutRun returns the newest fleetbot rollout check run on the control commit sha (nil: none).
func (r *rolloutEnv) rolloutRun(sha string) *gh.CheckRun {
	r.t.Helper()
	name := checkrun.RolloutCheckName
	runs, _, err := r.human.Checks.ListCheckRunsForRef(context.Background(), "acme", "control", sha, &gh.ListCheckRunsOptions{CheckName: &name})
	require.NoError(r.t, err)
	var newest *gh.CheckRun
	for _, cr := range runs.CheckRuns {
		if newest == nil || cr.GetID() > newest.GetID() {
			newest = cr
		}
	}
	return newest
}

// waitTitle waits until the rollout check run on sha has the title want, and returns it.
func (r *rolloutEnv) waitTitle(sha, want string) *gh.CheckRun {
	r.t.Helper()
	var cr *gh.CheckRun
	r.eventually("the rollout check run to say "+want, func() bool {
		cr = r.rolloutRun(sha)
		return cr != nil && cr.GetOutput().GetTitle() == want
	})
	return cr
}

// waitOpen waits until exactly the cluster repos want have an open pull request.
func (r *rolloutEnv) waitOpen(want ...string) {
	r.t.Helper()
	sort.Strings(want)
	r.eventually("open pull requests in "+strings.Join(want, ", "), func() bool {
		var got []string
		for _, repo := range []string{"cluster-edge-1", "cluster-prod-eu-1", "cluster-prod-us-1", "cluster-staging-eu-1"} {
			if r.open(repo) != nil {
				got = append(got, repo)
			}
		}
		return strings.Join(got, ",") == strings.Join(want, ",")
	})
}

// TestServeRolloutAdvancesOnWebhooksAndTheClock drives a three-wave rollout through serve's
// webhook path: a control pull request declares the waves (the change rolled out; its plan
// check run previews them) and is merged, the canary's merge and Flux's
// status arrive as webhooks and each advances the rollout at once, the soak's end is a wake-up
// on the (fake) clock, not a resync, and the fleetbot rollout check run on the control commit
// follows: the current wave, done/total per wave, then done. A later change halts on a failed
// status, and the check run says on which cluster and why; a newer one supersedes it.
func TestServeRolloutAdvancesOnWebhooksAndTheClock(t *testing.T) {
	t.Parallel()
	r := startRolloutServe(t)
	resyncs := r.reason("resync")

	// The waves arrive as a control-repo pull request: its plan check run previews them.
	ctx := context.Background()
	_, _, err := r.human.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/waves"),
		Object: &gh.GitObject{SHA: gh.String(r.gh.Branch("acme", "control", "main"))}})
	require.NoError(t, err)
	head := r.gh.Commit("acme", "control", "waves", "rollout in waves", rolloutWaves(t))
	pull, _, err := r.human.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("waves"), Head: gh.String("waves"), Base: gh.String("main")})
	require.NoError(t, err)
	var plan *gh.CheckRun
	r.eventually("the plan check run of the control pull request", func() bool {
		runs, _, err := r.human.Checks.ListCheckRunsForRef(ctx, "acme", "control", head, nil)
		require.NoError(t, err)
		for _, cr := range runs.CheckRuns {
			if cr.GetName() == checkrun.DefaultCheckName && cr.GetStatus() == "completed" {
				plan = cr
			}
		}
		return plan != nil
	})
	assert.Contains(t, plan.GetOutput().GetSummary(), "### Rollout in waves")
	assert.Contains(t, plan.GetOutput().GetSummary(), "| 1 | canary | **active** | 0 / 1 | 1 | 0 | 0 | - |")
	r.waitOpen()

	merge, _, err := r.human.PullRequests.Merge(ctx, "acme", "control", pull.GetNumber(), "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	sha := merge.GetSHA()
	r.waitOpen("cluster-staging-eu-1")
	cr := r.waitTitle(sha, "wave 1 of 3 (canary): 0 of 1 clusters done")
	assert.Equal(t, "in_progress", cr.GetStatus())
	summary := cr.GetOutput().GetSummary()
	assert.Contains(t, summary, "| 1 | canary | **active** | 0 / 1 | 1 | 0 | 0 | - |")
	assert.Contains(t, summary, "| 2 | eu | waiting | 0 / 1 | 1 | 0 | 0 | - |")
	assert.Contains(t, summary, "| 3 | (rest) | waiting | 0 / 2 | 2 | 0 | 0 | - |")

	// The canary merges: a pull_request webhook, a full apply; nothing opens yet (no health).
	merges := r.reason(webhook.ReasonRolloutMerge)
	merged := r.mergeOpen("cluster-staging-eu-1")
	r.eventually("the merge to be applied", func() bool { return r.reason(webhook.ReasonRolloutMerge) > merges })
	r.idle()
	r.waitOpen()
	assert.Contains(t, r.rolloutRun(sha).GetOutput().GetSummary(), "| 1 | canary | **active** | 0 / 1 | 1 | 1 | 0 | - |")

	// Flux reports it healthy: a status webhook; the canary soaks for an hour.
	r.flux("cluster-staging-eu-1", merged, "success")
	soakEnd := r.gh.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cr = r.waitTitle(sha, "wave 1 of 3 (canary): 1 of 1 clusters done, soaking until "+soakEnd)
	assert.Contains(t, cr.GetOutput().GetSummary(), "| 1 | canary | **soaking** | 1 / 1 | 1 | 1 | 1 | "+soakEnd+" |")
	r.idle()
	r.waitOpen()
	require.NotEmpty(t, r.clock.pending(), "a wake-up is scheduled for the soak's end")
	assert.Equal(t, soakEnd, r.clock.pending()[len(r.clock.pending())-1].UTC().Format(time.RFC3339))

	// Not before the soak ends...
	r.clock.Advance(30 * time.Minute)
	r.idle()
	r.waitOpen()
	// ...and at its end, the wake-up (no push, no resync) opens wave eu.
	r.clock.Advance(30 * time.Minute)
	r.waitOpen("cluster-prod-eu-1")
	assert.GreaterOrEqual(t, r.reason(webhook.ReasonRolloutTimer), 1)
	r.waitTitle(sha, "wave 2 of 3 (eu): 0 of 1 clusters done")

	// eu merges and is healthy (no soak): the rest opens at once.
	r.flux("cluster-prod-eu-1", r.mergeOpen("cluster-prod-eu-1"), "success")
	r.waitOpen("cluster-edge-1", "cluster-prod-us-1")
	r.waitTitle(sha, "wave 3 of 3 ((rest)): 0 of 2 clusters done")
	for _, repo := range []string{"cluster-edge-1", "cluster-prod-us-1"} {
		r.flux(repo, r.mergeOpen(repo), "success")
	}
	cr = r.waitTitle(sha, "rollout done: 3 of 3 waves")
	assert.Equal(t, "completed", cr.GetStatus())
	assert.Equal(t, "success", cr.GetConclusion())
	assert.Contains(t, cr.GetOutput().GetSummary(), "| 3 | (rest) | done | 2 / 2 | 2 | 2 | 2 | - |")
	r.idle()
	assert.Equal(t, resyncs, r.reason("resync"), "no resync ran: webhooks and the wake-up advanced the rollout")
	assert.Empty(t, r.clock.pending(), "a done rollout schedules nothing")

	// A later change reaches the rest only (edge-1's range); Flux reports a failure: halted.
	sha2 := r.gh.Commit("acme", "control", "main", "edge-1: new range", edge1("10.9.0.0/28"))
	r.waitOpen("cluster-edge-1")
	r.waitTitle(sha2, "wave 3 of 3 ((rest)): 1 of 2 clusters done")
	n := r.open("cluster-edge-1").GetNumber()
	r.flux("cluster-edge-1", r.mergeOpen("cluster-edge-1"), "failure")
	cr = r.waitTitle(sha2, fmt.Sprintf("rollout halted on edge-1: Flux reported a failure for the merge of #%d", n))
	assert.Equal(t, "failure", cr.GetConclusion())
	assert.Contains(t, cr.GetOutput().GetSummary(), "**Halted on edge-1** (wave (rest)): Flux reported a failure")
	assert.Equal(t, "success", r.rolloutRun(sha).GetConclusion(), "the done rollout of the earlier commit stays done")

	// A newer change supersedes the halted rollout: its check run says so, the new one goes on.
	sha3 := r.gh.Commit("acme", "control", "main", "edge-1: another range", edge1("10.8.0.0/28"))
	r.waitOpen("cluster-edge-1")
	r.waitTitle(sha3, "wave 3 of 3 ((rest)): 1 of 2 clusters done")
	cr = r.waitTitle(sha2, "superseded by "+sha3[:7])
	assert.Equal(t, "neutral", cr.GetConclusion())
	r.idle()
}

// TestServeRolloutSurvivesARestart: serve stopped while the canary soaks; a new process (its
// own memory empty) derives the rollout from GitHub at its startup resync, schedules the soak's
// end again and opens the next wave when the clock reaches it.
func TestServeRolloutSurvivesARestart(t *testing.T) {
	t.Parallel()
	r := startRolloutServe(t)
	sha := r.gh.Commit("acme", "control", "main", "rollout in waves", rolloutWaves(t))
	r.waitOpen("cluster-staging-eu-1")
	r.flux("cluster-staging-eu-1", r.mergeOpen("cluster-staging-eu-1"), "success")
	soakEnd := r.gh.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r.waitTitle(sha, "wave 1 of 3 (canary): 1 of 1 clusters done, soaking until "+soakEnd)
	r.idle()
	r.stop()

	var clock *fakeServeClock
	second := startServe(t, serveOptions{reuse: r.serveEnv, grace: time.Minute, clock: func(s *githubtest.Server) jobqueue.Clock {
		clock = &fakeServeClock{gh: s}
		return clock
	}})
	second.waitMetric(appliedOK, 1)
	second.idle()
	require.Len(t, clock.pending(), 1, "the restarted service scheduled the soak's end again")
	assert.Equal(t, soakEnd, clock.pending()[0].UTC().Format(time.RFC3339))
	r.waitOpen()
	clock.Advance(time.Hour)
	r.waitOpen("cluster-prod-eu-1")
	r.waitTitle(sha, "wave 2 of 3 (eu): 0 of 1 clusters done")
	second.idle()
}
