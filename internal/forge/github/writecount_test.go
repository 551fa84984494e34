package github_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestWriteCountMatchesFake: what fleetbot prices a decision at (pr.Decision.Cost through
// ghforge.Requests, the number BeforeWrite asks the budget for) is exactly what the fake
// GitHub counts when the decision runs: every write, blobs of binary files included, for a new
// repo, an update and a revert that closes the pull request.
func TestWriteCountMatchesFake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	ctx := context.Background()
	var tg *fanout.Target
	for _, x := range e.targets {
		if x.Kind == fanout.KindCluster {
			tg = x
			break
		}
	}
	require.NotNil(t, tg)
	tg.Files = maps.Clone(tg.Files)
	tg.Scaffolds = maps.Clone(tg.Scaffolds)
	// A binary managed file and a binary scaffold: each needs a blob before its tree.
	tg.Files["platform/logo.bin"] = []byte{0x89, 'P', 'N', 'G', 0, 1, 2}
	tg.Scaffolds["apps/logo.bin"] = []byte{0xff, 0xfe, 0}
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}

	step := func(name string, want pr.Action) {
		t.Helper()
		e.srv.ResetLog()
		before := f.Client().Stats().Requests
		d, err := pr.Plan(ctx, f, tg, opts)
		require.NoError(t, err, name)
		require.Equal(t, want, d.Action, "%s: %s", name, d.Reason)
		require.NoError(t, f.BeforeWrite(ctx, tg.Owner, tg.Repo, d.Cost()), name)
		_, err = pr.Apply(ctx, f, tg, d, opts)
		require.NoError(t, err, name)
		after := f.Client().Stats().Requests
		writes, content := ghforge.Requests(d.Cost())
		fake := fakeWrites(e)
		assert.Equal(t, writes, fake.writes, "%s: writes fleetbot priced vs the fake's (cost %+v)", name, d.Cost())
		assert.Equal(t, writes, int(after.Writes-before.Writes), "%s: writes fleetbot priced vs those its client sent", name)
		assert.Equal(t, content, int(after.ContentWrites-before.ContentWrites),
			"%s: content-creating writes fleetbot priced vs those its budget counted", name)
		// The client counts a moved ref as content creation (it publishes commits); the fake,
		// like GitHub's documentation, does not: fleetbot may only over-count.
		assert.LessOrEqual(t, fake.content, content, "%s: content-creating writes the fake counted", name)
	}

	step("new repo", pr.ActionCreate)
	require.Positive(t, fakeWrites(e).writes)

	tg.Files["platform/logo.bin"] = []byte{0x89, 'P', 'N', 'G', 0, 9, 9}
	tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# changed\n"...)
	step("update", pr.ActionUpdate)

	// The control repo asks for what the default branch already holds: close and delete.
	boot := map[string][]byte{}
	for _, p := range []string{"README.md", ".github/CODEOWNERS"} {
		boot[p] = tg.Files[p]
	}
	tg.Files = boot
	step("revert", pr.ActionClose)
}

// fakeWrites counts the writes the fake GitHub saw since its log was reset, but for the
// installation token minting (once per process, not per repo).
func fakeWrites(e *env) cost {
	var c cost
	for _, r := range e.srv.Requests() {
		if strings.HasPrefix(r.Route, "POST /app") {
			continue
		}
		switch r.Class {
		case githubtest.Write:
			c.writes++
		case githubtest.ContentCreating:
			c.writes++
			c.content++
		}
	}
	return c
}

// askingBudget is a write budget that refuses, recording what it was asked.
type askingBudget struct{ asked []int }

func (b *askingBudget) Afford(n int) (bool, time.Duration) {
	b.asked = append(b.asked, n)
	return false, 42 * time.Minute
}

// TestBeforeWriteAsksTheBudgetPort: the forge prices a repo's writes against the budget it
// is given (not only the client's), asking for every content-creating request of the cost,
// and a refusal defers the repo (pr.ErrDeferred) before anything is written.
func TestBeforeWriteAsksTheBudgetPort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := ghforge.New(ctx, ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme", Budget: e.budget,
	})
	require.NoError(t, err)
	b := &askingBudget{}
	f := ghforge.NewForge(c, ghforge.ForgeOptions{Budget: b})
	e.srv.ResetLog()
	cost := pr.Cost{Commits: 1, Files: 3, Blobs: 2, BranchMoves: 1, PROpens: 1, Labels: 1}
	err = f.BeforeWrite(ctx, "acme", "cluster-x", cost)
	require.ErrorIs(t, err, pr.ErrDeferred)
	assert.Contains(t, err.Error(), "acme/cluster-x needs 6 content-creating requests")
	assert.Contains(t, err.Error(), "42m0s")
	_, content := ghforge.Requests(cost)
	assert.Equal(t, []int{content}, b.asked)
	assert.Zero(t, fakeWrites(e).writes, "nothing written")
}

// TestForgesDeclareTheirCapabilities: what each forge can do beyond pr.Forge is declared,
// not guessed: GitHub scans, gates writes, checks CODEOWNERS and reports unavailable
// protection, and records merges itself.
func TestForgesDeclareTheirCapabilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	caps := e.forge(t, true).Capabilities()
	assert.NotNil(t, caps.Scanner)
	assert.NotNil(t, caps.WriteGate)
	assert.NotNil(t, caps.Codeowners)
	assert.NotNil(t, caps.Protection)
	assert.Nil(t, caps.MergeRecorder, "GitHub records merges itself")
}
