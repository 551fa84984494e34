package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestSettingsKeepRequiredChecks: the local forge's settings.json records the required status
// checks of a protection with their App, as GitHub's protection does, so that a plan on the
// local forge sees the same drift; a settings file of before (no checks) still reads.
func TestSettingsKeepRequiredChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	f := open(t, dir)
	check := policy.RequiredCheck{Context: "fleetbot tenant", AppID: 12}
	p := policy.DefaultProtection("main").WithCheck(check)
	desired := policy.Access{Teams: map[string]policy.Role{"platform": policy.RoleAdmin}, Protection: &p}
	require.NoError(t, f.CreateRepo(ctx, pr.RepoSpec{Owner: "acme", Repo: "r", Kind: "workspace", Name: "r", DefaultBranch: "main", Access: desired}))

	b, err := os.ReadFile(filepath.Join(dir, "acme", "r.settings.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"requiredChecks": [`)
	assert.Contains(t, string(b), `"appId": 12`)
	got, err := f.Access(ctx, "acme", "r", policy.Access{})
	require.NoError(t, err)
	assert.Equal(t, []policy.RequiredCheck{check}, got.Protection.RequiredChecks)
	converged := policy.Diff(desired, got, policy.DiffOptions{})
	assert.True(t, converged.Empty(), "converged")

	// Unbound by hand: drift, and ApplyAccess binds it again.
	unbound := got.Clone()
	unbound.Protection.RequiredChecks[0].AppID = 0
	require.NoError(t, f.ApplyAccess(ctx, "acme", "r", policy.Plan{Protection: unbound.Protection}))
	got, err = f.Access(ctx, "acme", "r", policy.Access{})
	require.NoError(t, err)
	plan := policy.Diff(desired, got, policy.DiffOptions{})
	assert.Equal(t, []string{`status check "fleetbot tenant" is required from any source, not only from GitHub App 12`}, plan.ProtectionDrift)
	require.NoError(t, f.ApplyAccess(ctx, "acme", "r", plan))
	got, err = f.Access(ctx, "acme", "r", policy.Access{})
	require.NoError(t, err)
	assert.Equal(t, []policy.RequiredCheck{check}, got.Protection.RequiredChecks)

	// A settings file written before required checks existed reads as none.
	old := `{"managedBy":"fleetbot","kind":"cluster","name":"o","defaultBranch":"main","teams":{},"protection":{"branch":"main","requirePullRequest":true,"requireCodeOwnerReviews":true,"dismissStaleReviews":true,"requiredApprovals":1,"allowForcePushes":false,"allowDeletions":false},"collaborators":{}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "acme", "o.settings.json"), []byte(old), 0o644))
	got, err = f.Access(ctx, "acme", "o", policy.Access{})
	require.NoError(t, err)
	assert.Empty(t, got.Protection.RequiredChecks)
}
