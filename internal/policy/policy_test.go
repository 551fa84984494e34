package policy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestClusterRepoAccess(t *testing.T) {
	a := ClusterRepoAccess([]string{"platform"}, []string{"payments-sre"}, []string{"payments-devs"}, "main")
	assert.Equal(t, map[string]Role{
		"platform":      RoleAdmin,
		"payments-sre":  RolePush,
		"payments-devs": RolePull,
	}, a.Teams)
	require.NotNil(t, a.Protection)
	assert.Equal(t, *DefaultProtection("main"), *a.Protection)
	assert.Empty(t, a.Collaborators)
}

func TestClusterRepoAccessStrongestRoleWins(t *testing.T) {
	// A team that is both platform admin and workspace admin keeps admin,
	// whatever order the personas are listed in.
	a := ClusterRepoAccess([]string{"ops"}, []string{"ops", "sre"}, []string{"ops", "sre", "devs"}, "main")
	assert.Equal(t, map[string]Role{"ops": RoleAdmin, "sre": RolePush, "devs": RolePull}, a.Teams)
}

func TestWorkspaceAndControlRepoAccess(t *testing.T) {
	w := WorkspaceRepoAccess([]string{"platform"}, []string{"payments-devs"}, "trunk")
	assert.Equal(t, map[string]Role{"platform": RoleAdmin, "payments-devs": RolePush}, w.Teams)
	assert.Equal(t, "trunk", w.Protection.Branch)

	c := ControlRepoAccess([]string{"platform", "sre-leads"}, "main")
	assert.Equal(t, map[string]Role{"platform": RoleAdmin, "sre-leads": RoleAdmin}, c.Teams)
}

func TestDefaultProtection(t *testing.T) {
	p := DefaultProtection("main")
	assert.Equal(t, Protection{
		Branch: "main", RequirePullRequest: true, RequireCodeOwnerReviews: true,
		DismissStaleReviews: true, RequiredApprovals: 1,
	}, *p)
}

func TestCODEOWNERS(t *testing.T) {
	got := string(CODEOWNERS("acme", []Rule{
		{Pattern: "*", Teams: []string{"platform", "sre-leads"}},
		{Pattern: "/apps/", Teams: []string{"payments-devs"}},
		{Pattern: "/clusters/*/kustomization.yaml", Teams: nil},
	}))
	want := "# Managed by fleetbot: changes are overwritten.\n" +
		"# Change owners in the fleetbot control repo instead.\n" +
		"# The last matching pattern takes precedence.\n" +
		"* @acme/platform @acme/sre-leads\n" +
		"/apps/ @acme/payments-devs\n" +
		"# /clusters/*/kustomization.yaml has no team of its own: it stays with the rules above.\n"
	assert.Equal(t, want, got)
}

func TestDiffConverges(t *testing.T) {
	desired := WorkspaceRepoAccess([]string{"platform"}, []string{"devs", "qa"}, "main")
	observed := Access{
		Teams:         map[string]Role{"platform": RoleAdmin, "devs": RoleAdmin, "intruders": RolePush, "x": RolePull, "y": RolePull, "z": RolePull},
		Collaborators: map[string]Role{"mallory": RoleAdmin},
		Protection:    &Protection{Branch: "main", RequirePullRequest: true, RequiredApprovals: 2, AllowForcePushes: true},
	}
	p := Diff(desired, observed, DiffOptions{Protected: []string{"platform"}, MaxRemovals: ptr(intstr.FromString("100%"))})
	assert.Equal(t, []Grant{{Name: "qa", Role: RolePush}}, p.Grants)
	assert.Equal(t, []Change{{Name: "devs", From: RoleAdmin, To: RolePush}}, p.Changes)
	assert.Equal(t, []Grant{{Name: "intruders", Role: RolePush}, {Name: "x", Role: RolePull}, {Name: "y", Role: RolePull}, {Name: "z", Role: RolePull}}, p.Revokes)
	assert.Equal(t, []Grant{{Name: "mallory", Role: RoleAdmin}}, p.RemoveCollaborators)
	require.NotNil(t, p.Protection)
	want := *DefaultProtection("main")
	want.RequiredApprovals = 2 // raised by hand: kept
	assert.Equal(t, want, *p.Protection)
	// Stricter approvals are not drift; the three weaker settings are.
	assert.Equal(t, []string{"code owner reviews are not required", "stale reviews are not dismissed", "force pushes are allowed"}, p.ProtectionDrift)
	assert.NoError(t, p.Refused)
	assert.Equal(t, 6, p.Removals())
	assert.False(t, p.Empty())
}

func TestDiffNoDrift(t *testing.T) {
	desired := ClusterRepoAccess([]string{"platform"}, []string{"sre"}, nil, "main")
	p := Diff(desired, desired, DiffOptions{})
	assert.True(t, p.Empty(), "identical access must plan nothing: %+v", p)
	assert.NoError(t, p.Refused)
}

func TestDiffUnprotectedBranch(t *testing.T) {
	desired := ControlRepoAccess([]string{"platform"}, "main")
	p := Diff(desired, Access{Teams: map[string]Role{"platform": RoleAdmin}}, DiffOptions{})
	assert.Equal(t, []string{"branch main is not protected"}, p.ProtectionDrift)
	assert.NotNil(t, p.Protection)
}

func TestDiffNeverRemovesProtected(t *testing.T) {
	// The platform team vanished from the desired state (a broken control
	// repo) and the bot is a collaborator: neither may be removed.
	desired := Access{Teams: map[string]Role{"devs": RolePush}}
	observed := Access{
		Teams:         map[string]Role{"platform": RoleAdmin, "devs": RolePush},
		Collaborators: map[string]Role{"fleetbot[bot]": RoleAdmin},
	}
	p := Diff(desired, observed, DiffOptions{Protected: []string{"platform", "fleetbot[bot]"}})
	assert.Empty(t, p.Revokes)
	assert.Empty(t, p.RemoveCollaborators)
	assert.Len(t, p.Withheld, 2)

	// Nor downgraded.
	desired = Access{Teams: map[string]Role{"platform": RolePull}}
	p = Diff(desired, Access{Teams: map[string]Role{"platform": RoleAdmin}}, DiffOptions{Protected: []string{"platform"}})
	assert.Empty(t, p.Changes)
	assert.Len(t, p.Withheld, 1)
}

func TestDiffAdditiveOnlyAdds(t *testing.T) {
	desired := Access{Teams: map[string]Role{"platform": RoleAdmin, "devs": RolePush, "qa": RolePush}}
	observed := Access{
		Teams:         map[string]Role{"platform": RoleAdmin, "devs": RoleAdmin, "qa": RolePull, "extra": RolePush},
		Collaborators: map[string]Role{"alice": RolePush},
	}
	p := Diff(desired, observed, DiffOptions{Additive: true})
	assert.Empty(t, p.Revokes)
	assert.Empty(t, p.RemoveCollaborators)
	assert.Equal(t, []Change{{Name: "qa", From: RolePull, To: RolePush}}, p.Changes, "upgrades are additions")
	assert.Len(t, p.Withheld, 3, "downgrade, revoke and collaborator are reported")
	assert.Zero(t, p.Removals())
	assert.NoError(t, p.Refused)
}

func TestDiffRefusesMassRemoval(t *testing.T) {
	desired := Access{Teams: map[string]Role{"platform": RoleAdmin}}
	observed := Access{Teams: map[string]Role{"platform": RoleAdmin, "a": RolePush, "b": RolePush, "c": RolePull}}
	p := Diff(desired, observed, DiffOptions{Protected: []string{"platform"}})
	require.Error(t, p.Refused)
	assert.True(t, errors.Is(p.Refused, ErrTooManyRemovals))
	var re *RemovalsError
	require.ErrorAs(t, p.Refused, &re, "the refusal is typed: a report names the repo and the detail without parsing the message")
	assert.Equal(t, "3 of 4 grants would be removed, the limit is 1 (maxAccessRemovals)", re.Detail)
	assert.Equal(t, "too many access removals: "+re.Detail, p.Refused.Error())
	assert.Len(t, p.Revokes, 3, "the plan still lists what it would remove")

	// A single hand-granted extra is always correctable (cap at least 1).
	observed = Access{Teams: map[string]Role{"platform": RoleAdmin, "rogue": RoleAdmin}}
	p = Diff(desired, observed, DiffOptions{})
	assert.NoError(t, p.Refused)
	assert.Equal(t, []Grant{{Name: "rogue", Role: RoleAdmin}}, p.Revokes)

	// An absolute cap.
	observed = Access{Teams: map[string]Role{"platform": RoleAdmin, "a": RolePush, "b": RolePush}}
	p = Diff(desired, observed, DiffOptions{MaxRemovals: ptr(intstr.FromInt32(2))})
	assert.NoError(t, p.Refused)
	p = Diff(desired, observed, DiffOptions{MaxRemovals: ptr(intstr.FromInt32(1))})
	assert.ErrorIs(t, p.Refused, ErrTooManyRemovals)

	// A malformed cap refuses rather than removes.
	p = Diff(desired, observed, DiffOptions{MaxRemovals: ptr(intstr.FromString("lots"))})
	assert.ErrorIs(t, p.Refused, ErrTooManyRemovals)
	require.ErrorAs(t, p.Refused, &re)
	assert.Contains(t, re.Detail, "invalid maxAccessRemovals")
	assert.Error(t, re.Err, "the cause is kept")
}

func ptr[T any](v T) *T { return &v }

func TestDiffKeepsRaisedApprovals(t *testing.T) {
	desired := ControlRepoAccess([]string{"platform"}, "main")
	observed := Access{Teams: map[string]Role{"platform": RoleAdmin},
		Protection: &Protection{Branch: "main", RequirePullRequest: true, RequiredApprovals: 3, DismissStaleReviews: true}}
	p := Diff(desired, observed, DiffOptions{})
	require.NotNil(t, p.Protection)
	assert.Equal(t, 3, p.Protection.RequiredApprovals, "a floor raised by hand is kept")
	assert.True(t, p.Protection.RequireCodeOwnerReviews)
}

func TestConverge(t *testing.T) {
	desired := WorkspaceRepoAccess([]string{"platform"}, []string{"devs"}, "main")
	observed := Access{
		Teams:         map[string]Role{"platform": RoleAdmin, "devs": RoleAdmin, "rogue": RoleAdmin},
		Collaborators: map[string]Role{"mallory": RolePush},
	}
	p := Diff(desired, observed, DiffOptions{Protected: []string{"platform"}, MaxRemovals: ptr(intstr.FromString("100%"))})
	got := Converge(observed, p)
	assert.Equal(t, desired.Teams, got.Teams)
	assert.Empty(t, got.Collaborators)
	assert.Equal(t, desired.Protection, got.Protection)
	assert.Equal(t, RoleAdmin, observed.Teams["rogue"], "observed is not modified")
	again := Diff(desired, got, DiffOptions{})
	assert.True(t, again.Empty(), "converged access has no drift")
	assert.Equal(t, []string{
		"lower team devs from admin to push",
		"revoke team rogue (admin, not in the persona matrix)",
		"remove direct collaborator mallory (push; access is granted through teams only)",
		"protect: branch main is not protected",
	}, p.Describe())
}

func TestOrg(t *testing.T) {
	o := Org{Name: "acme", Teams: []string{"platform", "Devs"}, Archived: []string{"cluster-old"}}
	assert.True(t, o.HasTeam("devs"))
	assert.False(t, o.HasTeam("payments-sre"))
	assert.True(t, Org{}.HasTeam("anything"), "unknown teams: every team exists")
	assert.True(t, o.IsArchived("Cluster-Old"))
	assert.False(t, o.IsArchived("cluster-new"))
}

func TestCheckCODEOWNERS(t *testing.T) {
	access := Access{Teams: map[string]Role{"platform": RoleAdmin, "devs": RolePush, "readers": RolePull},
		Collaborators: map[string]Role{"alice": RolePush}}
	org := Org{Name: "acme", Teams: []string{"platform", "devs", "readers"}}
	content := "# comment\n" +
		"* @acme/platform\n" +
		"/apps/ @acme/devs @alice dev@example.com # trailing comment\n" +
		"/docs/ @acme/readers\n" +
		"/x/ @acme/ghosts @other/platform @bob\n" +
		"!/secret @acme/platform\n" +
		"/[ab]/ @acme/platform\n" +
		"/y/ platform\n"
	got := CheckCODEOWNERS(".github/CODEOWNERS", []byte(content), "acme", org, access)
	var lines []string
	for _, e := range got {
		lines = append(lines, e.String())
	}
	assert.Equal(t, []string{
		".github/CODEOWNERS:4: Unknown owner: team @acme/readers has no write access to the repository",
		".github/CODEOWNERS:5: Unknown owner: team @acme/ghosts does not exist in acme",
		".github/CODEOWNERS:5: Unknown owner: team @other/platform belongs to another organization than acme",
		".github/CODEOWNERS:5: Unknown owner: user @bob is not a collaborator with write access",
		".github/CODEOWNERS:6: Invalid pattern: negation patterns are not supported: !/secret",
		".github/CODEOWNERS:7: Invalid pattern: character ranges are not supported: /[ab]/",
		".github/CODEOWNERS:8: Invalid owner: platform is not a valid owner; owners are @user, @org/team or an email",
	}, lines)

	// What fleetbot generates is clean once access is converged.
	gen := CODEOWNERS("acme", []Rule{{Pattern: "*", Teams: []string{"platform"}}, {Pattern: "/apps/", Teams: []string{"devs"}}})
	assert.Empty(t, CheckCODEOWNERS(".github/CODEOWNERS", gen, "acme", org, access))
}

// TestDiffAllowAutoMerge: "Allow auto-merge" is planned on when desired and off, also in
// additive mode (it only adds); a repo allowing it when not desired is not drift.
func TestDiffAllowAutoMerge(t *testing.T) {
	for _, tc := range []struct {
		name              string
		desired, observed bool
		additive, want    bool
	}{
		{name: "wanted and off", desired: true, want: true},
		{name: "wanted and off, additive", desired: true, additive: true, want: true},
		{name: "wanted and on", desired: true, observed: true},
		{name: "not wanted, on: left alone", observed: true},
	} {
		p := Diff(Access{AllowAutoMerge: tc.desired}, Access{AllowAutoMerge: tc.observed}, DiffOptions{Additive: tc.additive})
		assert.Equal(t, tc.want, p.AllowAutoMerge, tc.name)
		assert.Equal(t, !tc.want, p.Empty(), tc.name)
		if tc.want {
			assert.Contains(t, p.Describe(), "allow auto-merge (pullRequests.merge: auto; the repo does not allow it)", tc.name)
			assert.True(t, Converge(Access{}, p).AllowAutoMerge, tc.name)
		}
	}
}
