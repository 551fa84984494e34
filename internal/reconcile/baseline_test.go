package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// readCounter is a forge that records which repos a run read, and can fail one.
type readCounter struct {
	Forge
	mu    sync.Mutex
	reads []string
	fail  string
}

func (f *readCounter) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	f.mu.Lock()
	f.reads = append(f.reads, repo)
	fail := f.fail == repo
	f.mu.Unlock()
	if fail {
		return nil, errors.New("injected failure")
	}
	return f.Forge.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

func (f *readCounter) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reads
	f.reads = nil
	sort.Strings(out)
	return out
}

// TestIncrementalApply: with a baseline, Apply plans only the repos whose desired state changed,
// leaves the repos exactly as a full apply does, keeps the baseline across a restart (a new
// Baselines on the same file), and turns full when there is no usable baseline (none, deleted,
// corrupt, another version), when the last full run is too old, when the platform
// configuration changed, when a target left the control repo, and after a failed run.
func TestIncrementalApply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	file := filepath.Join(t.TempDir(), "state", "baseline.json")
	f := &readCounter{Forge: openForge(t, t.TempDir())}
	full := openForge(t, t.TempDir())
	fl := tenClusters()
	baselines := NewBaselines(file, log)
	labels := []string{"fleetbot"}
	run := func(name string, b *Baselines, edit func(*Options)) (*Report, []string) {
		t.Helper()
		opts := Options{Now: func() time.Time { return now }, Logger: log, Incremental: &Incremental{Baselines: b}}
		if edit != nil {
			edit(&opts)
		}
		repo := fl.repo()
		repo.Platform.Spec.PullRequests.Labels = labels
		rep, err := Apply(context.Background(), f, repo, fl.targets(), opts)
		if f.fail == "" {
			require.NoError(t, err, name)
			_, err = Apply(context.Background(), full, repo, fl.targets(), Options{Now: opts.Now})
			require.NoError(t, err, name)
			assert.Equal(t, allRefs(t, full), allRefs(t, f.Forge.(*local.Forge)), "%s: the same repos as a full apply", name)
		}
		return rep, f.take()
	}
	all := repoNames(fl)

	rep, read := run("no baseline", baselines, nil)
	assert.False(t, rep.Incremental)
	assert.Contains(t, rep.Scope, "no baseline")
	assert.Equal(t, all, read)
	require.FileExists(t, file)

	rep, read = run("nothing changed", baselines, nil)
	assert.True(t, rep.Incremental)
	assert.Empty(t, read, "nothing changed: no repo read")
	assert.Empty(t, rep.Results)

	fl["c03"] = "v2"
	rep, read = run("one cluster", baselines, nil)
	assert.True(t, rep.Incremental)
	assert.Equal(t, []string{"cluster-c03"}, read)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, pr.ActionUpdate, rep.Results[0].Action)

	fl["c11"] = "v1"
	_, read = run("a new cluster", baselines, nil)
	assert.Equal(t, []string{"cluster-c11"}, read)

	// A service passes the digests of a render it applies many times: the same scope.
	fl["c05"] = "v2"
	_, read = run("precomputed digests", baselines, func(o *Options) { o.Incremental.Digests = Digests(fl.targets()) })
	assert.Equal(t, []string{"cluster-c05"}, read)
	_, read = run("precomputed digests, then nothing changed", baselines, func(o *Options) { o.Incremental.Digests = Digests(fl.targets()) })
	assert.Empty(t, read, "the run with precomputed digests recorded them as its baseline")

	// A restart: a new store on the same file is as warm as the old one.
	fl["c04"] = "v2"
	_, read = run("after a restart", NewBaselines(file, log), nil)
	assert.Equal(t, []string{"cluster-c04"}, read)
	all = repoNames(fl)

	for _, c := range []struct {
		name, content, log string
	}{
		{"a corrupt baseline", "{\"version\": 1, \"repos\": {", "ignoring a corrupt reconcile baseline"},
		{"a baseline of another version", `{"version": 99, "repos": {}}`, "ignoring a reconcile baseline of another version"},
		{"a deleted baseline", "", ""},
	} {
		logs.Reset()
		if c.content == "" {
			require.NoError(t, os.Remove(file))
		} else {
			require.NoError(t, os.WriteFile(file, []byte(c.content), 0o600))
		}
		rep, read = run(c.name, NewBaselines(file, log), nil)
		assert.False(t, rep.Incremental, c.name)
		assert.Equal(t, all, read, "%s: every repo", c.name)
		assert.Contains(t, logs.String(), c.log, c.name)
		_, read = run(c.name+", then nothing changed", NewBaselines(file, log), nil)
		assert.Empty(t, read, "%s: the full run recorded a new baseline", c.name)
	}

	now = now.Add(DefaultFullEvery)
	rep, read = run("the last full run is an hour old", baselines, nil)
	assert.Contains(t, rep.Scope, "older than")
	assert.Equal(t, all, read)
	_, read = run("an hour old, then nothing changed", baselines, nil)
	assert.Empty(t, read)

	_, read = run("a full run asked for", baselines, func(o *Options) { o.Incremental.Full = true })
	assert.Equal(t, all, read)

	labels = append(labels, "fleet")
	_, read = run("another platform configuration", baselines, nil)
	assert.Equal(t, all, read, "the pull request labels changed: every repo")
	_, read = run("another fleetbot version", baselines, func(o *Options) { o.Incremental.Salt = "v2" })
	assert.Equal(t, all, read, "another salt: every repo")

	fl["c05"] = "v2"
	f.fail = "cluster-c05"
	rep, _ = run("a failed run", baselines, nil)
	require.NotNil(t, rep)
	assert.NoFileExists(t, file, "a failed run forgets the baseline")
	f.fail = ""
	rep, read = run("after a failed run", baselines, nil)
	assert.False(t, rep.Incremental)
	assert.Equal(t, all, read)

	delete(fl, "c11")
	rep, read = run("a removed cluster", baselines, func(o *Options) { o.AllowRemovals = true })
	assert.Contains(t, rep.Scope, "left the control repo")
	assert.Equal(t, all, read, "a removal plans the whole fleet, the removed repo included")
}

// orgReads is readCounter counting the org reads too.
type orgReads struct {
	*readCounter
	mu   sync.Mutex
	orgs int
}

func (f *orgReads) Org(ctx context.Context, owner string) (policy.Org, error) {
	f.mu.Lock()
	f.orgs++
	f.mu.Unlock()
	return f.readCounter.Org(ctx, owner)
}

// TestIncrementalPlan: a plan with a baseline (a pull request's check) plans only the repos
// whose desired state differs from the last converged apply's, with the decisions a full plan
// makes for them; it still reads the org when no repo differs, records no baseline and writes
// nothing; without a usable baseline, or with another platform configuration, it is full.
func TestIncrementalPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	f := &orgReads{readCounter: &readCounter{Forge: openForge(t, dir)}}
	fl := tenClusters()
	baselines := NewBaselines("", slog.New(slog.DiscardHandler))
	plan := func(name string, b *Baselines, edit func(*control.Repo)) (*Report, []string) {
		t.Helper()
		repo := fl.repo()
		if edit != nil {
			edit(repo)
		}
		before := dirState(t, dir)
		rep, err := Plan(context.Background(), f, repo, fl.targets(), Options{Now: func() time.Time { return now },
			Incremental: &Incremental{Baselines: b, FullEvery: -1}})
		require.NoError(t, err, name)
		assert.Equal(t, before, dirState(t, dir), "%s: a plan writes nothing", name)
		return rep, f.take()
	}
	all := repoNames(fl)

	rep, read := plan("no baseline", baselines, nil)
	assert.False(t, rep.Incremental)
	assert.Contains(t, rep.Scope, "full: no baseline")
	assert.Equal(t, all, read)
	assert.Nil(t, baselines.Get(), "a plan records no baseline")

	_, err := Apply(context.Background(), f, fl.repo(), fl.targets(), Options{Now: func() time.Time { return now }, Incremental: &Incremental{Baselines: baselines}})
	require.NoError(t, err)
	f.take()
	recorded := baselines.Get()
	require.NotNil(t, recorded)

	f.mu.Lock()
	f.orgs = 0
	f.mu.Unlock()
	rep, read = plan("nothing changed", baselines, nil)
	assert.True(t, rep.Incremental)
	assert.Equal(t, "incremental: 0 of 10 target repos changed since "+recorded.Source[:12], rep.Scope)
	assert.Empty(t, read)
	assert.Empty(t, rep.Results)
	f.mu.Lock()
	assert.Equal(t, 1, f.orgs, "the org is read all the same (the control repo's teams are checked against it)")
	f.mu.Unlock()

	fl["c03"] = "v2"
	rep, read = plan("one cluster", baselines, nil)
	assert.True(t, rep.Incremental)
	assert.Equal(t, []string{"cluster-c03"}, read)
	require.Len(t, rep.Results, 1)
	full, err := Plan(context.Background(), f, fl.repo(), fl.targets(), Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	f.take()
	for _, r := range full.Results {
		if r.Repo == "acme/cluster-c03" {
			assert.Equal(t, r.Action, rep.Results[0].Action, "the decision of the full plan")
			assert.Equal(t, r.Files, rep.Results[0].Files)
		} else {
			assert.False(t, r.Changed(), "%s: the full plan changes nothing else", r.Repo)
		}
	}
	assert.Same(t, recorded, baselines.Get(), "a plan records no baseline")
	_, read = plan("one cluster, again", baselines, nil)
	assert.Equal(t, []string{"cluster-c03"}, read, "still the one cluster: nothing was recorded")

	rep, read = plan("another platform configuration", baselines, func(r *control.Repo) {
		r.Platform.Spec.PullRequests.Labels = []string{"fleetbot", "fleet"}
	})
	assert.False(t, rep.Incremental)
	assert.Contains(t, rep.Scope, "platform configuration changed")
	assert.Equal(t, all, read)
}

// TestLimitedRunWeighsRemovalsAgainstTheFleet: two of 30 clusters losing a platform component
// is within maxRemovals (10 % of the fleet: 3) for a full plan, and so it is for an incremental
// plan and apply, which plan only those two repos.
func TestLimitedRunWeighsRemovalsAgainstTheFleet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := openForge(t, t.TempDir())
	fl := tenClusters()
	for i := 11; i <= 30; i++ {
		fl[fmt.Sprintf("c%02d", i)] = "v1"
	}
	b := NewBaselines("", slog.New(slog.DiscardHandler))
	opts := func(in *Incremental) Options { return Options{Now: func() time.Time { return now }, Incremental: in} }
	_, err := Apply(context.Background(), f, fl.repo(), fl.targets(), opts(&Incremental{Baselines: b}))
	require.NoError(t, err)
	require.NotNil(t, b.Get())
	ts := fl.targets()
	for _, tg := range ts {
		if tg.Name == "c01" || tg.Name == "c02" {
			delete(tg.Files, "platform/monitoring.yaml")
			tg.Files["platform/kustomization.yaml"] = []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n")
		}
	}
	full, err := Plan(context.Background(), f, fl.repo(), ts, opts(nil))
	require.NoError(t, err)
	assert.Nil(t, full.Refused)
	assert.Equal(t, 3, full.MaxRemovals)

	inc, err := Plan(context.Background(), f, fl.repo(), ts, opts(&Incremental{Baselines: b, FullEvery: -1}))
	require.NoError(t, err)
	assert.True(t, inc.Incremental)
	assert.Len(t, inc.Results, 2)
	assert.Nil(t, inc.Refused, "weighed against the fleet, not the two repos planned")
	assert.Equal(t, 3, inc.MaxRemovals)

	rep, err := Apply(context.Background(), f, fl.repo(), ts, opts(&Incremental{Baselines: b}))
	require.NoError(t, err)
	assert.True(t, rep.Incremental)
	assert.Nil(t, rep.Refused)
}
