package github_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// fakeTime is a ghforge.Clock on the fake GitHub's scaled time: limits are counted in the
// server's minutes and hours, and a wait of d takes d/scale of wall time.
type fakeTime struct {
	srv   *githubtest.Server
	scale float64
}

func (c fakeTime) Now() time.Time { return c.srv.Now() }

func (c fakeTime) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(time.Duration(float64(d) / c.scale))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// serverTime is a ghforge.Clock on a fake GitHub with a manual clock: Sleep advances the
// server's time instead of waiting, so the client and the fake share one clock, windows pass
// at once and nothing depends on the machine's speed.
type serverTime struct{ srv *githubtest.Server }

func (c serverTime) Now() time.Time { return c.srv.Now() }

func (c serverTime) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.srv.AdvanceClock(d)
	return nil
}

// TestSecondaryLimitBackoff: GitHub's content-creation limit is tighter than fleetbot's
// budget (a smaller account, another tool on the same installation), and GitHub answers it
// with 403 or 429, with or without Retry-After, and also limits points. The run meets the
// limits, pauses the whole installation as long as GitHub says (a minute, then exponentially
// longer, when it says nothing), never sends two mutations at once nor less than a second
// apart (the fake refuses those too), and completes. Clock-driven: the client sleeps on the
// fake's clock.
func TestSecondaryLimitBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter bool
	}{
		{"403 with Retry-After", 403, true},
		{"429 with Retry-After", 429, true},
		{"403 without Retry-After", 403, false},
		{"429 without Retry-After", 429, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, githubtest.WithManualClock(), githubtest.WithSecondaryLimitStatus(tc.status),
				githubtest.WithContentCreationLimit(15, 0, tc.retryAfter), githubtest.WithPointsLimit(900, tc.retryAfter),
				githubtest.WithMutationPacing(time.Second))
			// fleetbot's own budget (80/min) does not bind here; its pacing does.
			e.budget = ghforge.BudgetConfig{Clock: serverTime{e.srv}}
			e.srv.ResetLog()
			rep := e.apply(t, e.forge(t, false))
			for _, r := range rep.Results {
				assert.NoError(t, r.Err, r.Repo)
				assert.Equal(t, pr.ActionCreate, r.Action, r.Repo)
				assert.NotZero(t, r.PR, r.Repo)
			}
			log := e.srv.Requests()
			rejected := 0
			var prev *githubtest.Request
			for i, r := range log {
				if r.Class == githubtest.Read || r.Principal == "" || r.Principal == githubtest.DefaultUser {
					continue
				}
				if prev != nil {
					assert.GreaterOrEqual(t, r.Time.Sub(prev.Time), time.Second, "%s %s: mutations at least a second apart", r.Method, r.Path)
				}
				prev = &log[i]
				if r.Status != tc.status {
					continue
				}
				rejected++
				wait := r.RetryAfter
				if !tc.retryAfter {
					wait = time.Minute
				}
				for _, next := range log[i+1:] {
					if next.Class != githubtest.Read && next.Time.After(r.Time) {
						assert.GreaterOrEqual(t, next.Time.Sub(r.Time), wait, "%s %s sent %s after a secondary limit", next.Method, next.Path, next.Time.Sub(r.Time))
						break
					}
				}
			}
			assert.Positive(t, rejected, "the fake's limit was hit")
			if t.Failed() {
				for _, r := range log {
					t.Logf("  %s %s %s %s -> %d (retry-after %s)", r.Time.Format("15:04:05"), r.Principal, r.Method, r.Path, r.Status, r.RetryAfter)
				}
			}
			t.Logf("%d repos created in %s of fake time through %d secondary-limit answers",
				len(rep.Results), log[len(log)-1].Time.Sub(log[0].Time), rejected)
		})
	}
}

// TestBudgetDefers: when the hour budget cannot afford a repo's writes within the wait the
// client accepts, the repo is deferred (reported, nothing written for it) and the next run
// picks it up.
func TestBudgetDefers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.budget = ghforge.BudgetConfig{PerMinute: 1000, PerHour: 20, MaxWait: time.Minute, MinInterval: -1}
	f := e.forge(t, false)
	rep, err := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{Concurrency: 1})
	require.NoError(t, err, "deferred is not failed")
	deferred := rep.Deferred()
	require.NotEmpty(t, deferred)
	assert.Less(t, len(deferred), len(rep.Results), "some repos were created")
	for _, r := range deferred {
		assert.ErrorIs(t, r.Err, pr.ErrDeferred, r.Repo)
		assert.Nil(t, e.srv.Repo("acme", r.Repo[len("acme/"):]), "%s: nothing written", r.Repo)
	}
	var sb testWriter
	require.NoError(t, rep.WriteText(&sb))
	assert.Contains(t, string(sb), "deferred")

	// The next run, with a fresh budget (an hour later), finishes the job.
	e.budget.PerHour = 1000
	rep = e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		assert.False(t, r.Deferred(), r.Repo)
		assert.NotZero(t, r.PR, r.Repo)
	}
}

type testWriter []byte

func (w *testWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

// TestFanOut measures a first fan-out of N new repos under the default content-creation
// budget (80/min, 500/h), with the fake enforcing the same limits on a scaled clock. N is 24
// by default (one minute window); FLEETBOT_FANOUT=1000 measures the 1,000-repo fan-out
// (FLEETBOT_FANOUT_SCALE sets the time scale, default 600).
func TestFanOut(t *testing.T) {
	t.Parallel()
	n, scale := 24, 60.0
	if v := os.Getenv("FLEETBOT_FANOUT"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
		scale = 600
	}
	if v := os.Getenv("FLEETBOT_FANOUT_SCALE"); v != "" {
		var err error
		scale, err = strconv.ParseFloat(v, 64)
		require.NoError(t, err)
	}
	// By default the client sleeps on the fake's manual clock (nothing depends on the machine's
	// speed); the FLEETBOT_FANOUT measurement runs on scaled wall time.
	var clock ghforge.Clock
	opts := []githubtest.Option{githubtest.WithContentCreationLimit(ghforge.DefaultPerMinute, ghforge.DefaultPerHour, true),
		githubtest.WithPrimaryLimit(0)}
	measure := os.Getenv("FLEETBOT_FANOUT") != "" || os.Getenv("FLEETBOT_FANOUT_SCALE") != ""
	if measure {
		opts = append(opts, githubtest.WithTimeScale(scale))
	} else {
		opts = append(opts, githubtest.WithManualClock())
	}
	srv := githubtest.NewServer(t, opts...)
	if measure {
		clock = fakeTime{srv, scale}
	} else {
		clock = serverTime{srv}
	}
	srv.CreateTeam("acme", "platform")
	repo := &control.Repo{Platform: &control.Platform{Spec: control.PlatformSpec{
		Owner: "acme", Admins: []string{"platform"}, DefaultBranch: "main",
		PullRequests: control.PullRequestSpec{Branch: "fleetbot/sync"},
	}}, Revision: "c0ffee"}
	var targets []*fanout.Target
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c%04d", i)
		repo.Clusters = append(repo.Clusters, &control.Cluster{Metadata: control.Meta{Name: name}})
		targets = append(targets, &fanout.Target{
			Kind: fanout.KindCluster, Name: name, Owner: "acme", Repo: "cluster-" + name, DefaultBranch: "main",
			Visibility: "private",
			Files: map[string][]byte{
				"README.md":                []byte("# cluster-" + name + "\n"),
				".github/CODEOWNERS":       []byte("* @acme/platform\n"),
				"platform/monitoring.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n  namespace: monitoring\n"),
			},
			Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")},
			Access:    policy.Access{Teams: map[string]policy.Role{"platform": policy.RoleAdmin}},
		})
	}
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: ghforge.BudgetConfig{Clock: clock, MaxWait: 48 * time.Hour},
	})
	require.NoError(t, err)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{})
	srv.ResetLog()
	fake0, start := srv.Now(), time.Now()
	rep, err := reconcile.Apply(context.Background(), f, repo, targets, reconcile.Options{Concurrency: 8})
	require.NoError(t, err)
	wall, fake := time.Since(start), srv.Now().Sub(fake0)
	for _, r := range rep.Results {
		require.Equal(t, pr.ActionCreate, r.Action, r.Repo)
	}
	counts := srv.Counts()
	rejected := 0
	for _, r := range srv.Requests() {
		if r.Status == 403 {
			rejected++
		}
	}
	// The least time the limits allow: the first window's worth at once, then PerMinute per
	// minute within PerHour per hour.
	cc := counts.ContentCreating
	minimum := time.Duration(0)
	if over := cc - ghforge.DefaultPerHour; over > 0 {
		minimum = time.Duration(float64(over) / ghforge.DefaultPerHour * float64(time.Hour))
	}
	if perMin := time.Duration(float64(min(cc, ghforge.DefaultPerHour)-ghforge.DefaultPerMinute) / ghforge.DefaultPerMinute * float64(time.Minute)); perMin > minimum {
		minimum = perMin
	}
	stats := c.Stats()
	ratio := 0.0
	if minimum > 0 {
		ratio = float64(fake) / float64(minimum)
	}
	clockName := "the fake's manual clock"
	if measure {
		clockName = fmt.Sprintf("scale %g", scale)
	}
	t.Logf("fan-out of %d repos: %s wall, %s fake time (%s); %d content-creating requests on GitHub's count "+
		"(%d on fleetbot's stricter count), %d writes, %d reads; %d secondary-limit rejections; "+
		"least time the limits allow %s, ratio %.2f",
		n, wall.Round(time.Millisecond), fake.Round(time.Second), clockName, cc, stats.Requests.ContentWrites,
		counts.Writes, counts.Reads, rejected, minimum.Round(time.Second), ratio)
}
