package github_test

import (
	"context"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// requireTenantCheck makes every workspace and cluster repo of e require check, as serve's
// rendered fleet does.
func requireTenantCheck(e *env, check policy.RequiredCheck) {
	for _, tg := range e.targets {
		if tg.Kind == fanout.KindWorkspace || tg.Kind == fanout.KindCluster {
			p := tg.Access.Protection.WithCheck(check)
			tg.Access.Protection = &p
		}
	}
}

// TestProtectionRequiresTheTenantCheckFromTheApp: the protection fleetbot converges requires its
// tenant check from its own App on a new repo; a check bound to any source, or removed by hand,
// is drift and fixed, and a required check fleetbot does not own (a CI workflow's) stays.
func TestProtectionRequiresTheTenantCheckFromTheApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	check := policy.RequiredCheck{Context: "fleetbot tenant", AppID: e.srv.AppID()}
	requireTenantCheck(e, check)
	e.apply(t, e.forge(t, false))
	for _, tg := range e.targets {
		want := map[string]int64{"fleetbot tenant": e.srv.AppID()}
		if tg.Kind != fanout.KindWorkspace && tg.Kind != fanout.KindCluster {
			want = nil
		}
		assert.Equal(t, want, e.srv.RequiredChecks("acme", tg.Repo, "main"), tg.Repo)
	}

	// A repo admin binds the check to any source and adds a CI check of their own.
	repo := "workspace-payments"
	_, _, err := e.srv.Client().Repositories.UpdateBranchProtection(ctx, "acme", repo, "main", &gh.ProtectionRequest{
		RequiredStatusChecks: &gh.RequiredStatusChecks{Strict: true, Checks: &[]*gh.RequiredStatusCheck{
			{Context: "fleetbot tenant", AppID: gh.Int64(-1)}, {Context: "ci", AppID: gh.Int64(15368)}}},
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcementRequest{RequireCodeOwnerReviews: true, DismissStaleReviews: true, RequiredApprovingReviewCount: 1},
	})
	require.NoError(t, err)
	// The branch_protection_rule event's drift reads access afresh.
	f := driftForge(t, e)
	observed, err := f.Access(ctx, "acme", repo, policy.Access{})
	require.NoError(t, err)
	assert.Equal(t, []policy.RequiredCheck{{Context: "ci", AppID: 15368}, {Context: "fleetbot tenant"}}, observed.Protection.RequiredChecks)
	assert.True(t, observed.Protection.StrictChecks)

	rep := e.apply(t, f)
	var drift []string
	for _, r := range rep.Results {
		if r.Repo == "acme/"+repo && r.Access != nil {
			drift = r.Access.Steps
		}
	}
	assert.Contains(t, drift, `protect: status check "fleetbot tenant" is required from any source, not only from GitHub App 1`)
	assert.Equal(t, map[string]int64{"fleetbot tenant": e.srv.AppID(), "ci": 15368}, e.srv.RequiredChecks("acme", repo, "main"),
		"the check is bound to fleetbot again; the CI check stays")
	p, _, err := e.srv.Client().Repositories.GetBranchProtection(ctx, "acme", repo, "main")
	require.NoError(t, err)
	assert.True(t, p.GetRequiredStatusChecks().Strict, "strictness stays")
}

// driftForge is the forge of a drift reconcile: it reads access afresh (ForgeDrift in serve).
func driftForge(t *testing.T, e *env) *ghforge.Forge {
	t.Helper()
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme", Budget: e.budget,
	})
	require.NoError(t, err)
	return ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: e.cacheDir, AccessMaxAge: -1})
}
