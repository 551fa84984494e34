package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tenantCheck is serve's tenant check as the desired protection of a workspace repo names it.
var tenantCheck = RequiredCheck{Context: "fleetbot tenant", AppID: 12}

func withTenantCheck(a Access) Access {
	p := a.Protection.WithCheck(tenantCheck)
	a.Protection = &p
	return a
}

func TestRequiredCheckDrift(t *testing.T) {
	desired := withTenantCheck(WorkspaceRepoAccess([]string{"platform"}, []string{"devs"}, "main"))
	base := *DefaultProtection("main")
	for _, tc := range []struct {
		name   string
		checks []RequiredCheck
		drift  []string
	}{
		{"missing", nil, []string{`status check "fleetbot tenant" from GitHub App 12 is not required`}},
		{"another check only", []RequiredCheck{{Context: "ci", AppID: 15368}},
			[]string{`status check "fleetbot tenant" from GitHub App 12 is not required`}},
		{"any source", []RequiredCheck{{Context: "fleetbot tenant"}},
			[]string{`status check "fleetbot tenant" is required from any source, not only from GitHub App 12`}},
		{"another app", []RequiredCheck{{Context: "fleetbot tenant", AppID: 15368}},
			[]string{`status check "fleetbot tenant" is required from GitHub App 15368, not only from GitHub App 12`}},
		{"bound to fleetbot", []RequiredCheck{tenantCheck}, nil},
		{"bound to fleetbot, a CI check beside it", []RequiredCheck{{Context: "ci", AppID: 15368}, tenantCheck}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			o.RequiredChecks = tc.checks
			observed := Access{Teams: desired.Teams, Protection: &o}
			p := Diff(desired, observed, DiffOptions{})
			assert.Equal(t, tc.drift, p.ProtectionDrift)
			if tc.drift == nil {
				assert.True(t, p.Empty(), "no drift, nothing to do")
				return
			}
			require.NotNil(t, p.Protection)
			got := Converge(observed, p)
			assert.Empty(t, ProtectionDrift(*desired.Protection, got.Protection), "converged")
			assert.Contains(t, got.Protection.RequiredChecks, tenantCheck)
			for _, c := range tc.checks {
				if c.Context != tenantCheck.Context {
					assert.Contains(t, got.Protection.RequiredChecks, c, "a check fleetbot does not own stays required")
				}
			}
			assert.Equal(t, "protect: "+tc.drift[0], p.Describe()[0])
		})
	}
}

func TestDiffKeepsOtherRequiredChecks(t *testing.T) {
	// A desired protection without checks (the CLI's, the control repo's) fixes another setting
	// and keeps the checks and the strictness the branch requires.
	desired := WorkspaceRepoAccess([]string{"platform"}, []string{"devs"}, "main")
	o := *DefaultProtection("main")
	o.AllowForcePushes = true
	o.RequiredChecks, o.StrictChecks = []RequiredCheck{tenantCheck, {Context: "ci"}}, true
	p := Diff(desired, Access{Teams: desired.Teams, Protection: &o}, DiffOptions{})
	assert.Equal(t, []string{"force pushes are allowed"}, p.ProtectionDrift)
	require.NotNil(t, p.Protection)
	assert.False(t, p.Protection.AllowForcePushes)
	assert.Equal(t, []RequiredCheck{{Context: "ci"}, tenantCheck}, p.Protection.RequiredChecks)
	assert.True(t, p.Protection.StrictChecks)

	// No drift at all: extra checks are a stricter protection, not drift.
	o.AllowForcePushes = false
	p = Diff(desired, Access{Teams: desired.Teams, Protection: &o}, DiffOptions{})
	assert.True(t, p.Empty())
}

func TestWithCheckReplacesTheSameContext(t *testing.T) {
	p := Protection{Branch: "main", RequiredChecks: []RequiredCheck{{Context: "fleetbot tenant"}, {Context: "a"}}}
	got := p.WithCheck(tenantCheck)
	assert.Equal(t, []RequiredCheck{{Context: "a"}, tenantCheck}, got.RequiredChecks)
	assert.Equal(t, []RequiredCheck{{Context: "fleetbot tenant"}, {Context: "a"}}, p.RequiredChecks, "p is not modified")
}

func TestProtectionJSONWithoutChecksIsUnchanged(t *testing.T) {
	// A protection without required checks encodes as before: the local forge's settings files
	// and the digests of existing fleets stay the same.
	b, err := json.Marshal(DefaultProtection("main"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"branch":"main","requirePullRequest":true,"requireCodeOwnerReviews":true,"dismissStaleReviews":true,"requiredApprovals":1,"allowForcePushes":false,"allowDeletions":false}`, string(b))
	c := Access{Protection: &Protection{Branch: "main", RequiredChecks: []RequiredCheck{tenantCheck}}}.Clone()
	c2 := c.Clone()
	c2.Protection.RequiredChecks[0].AppID = 1
	assert.Equal(t, int64(12), c.Protection.RequiredChecks[0].AppID, "Clone copies the checks")
}
