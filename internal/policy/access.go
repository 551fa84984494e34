package policy

// Rank orders roles from weakest (pull, 1) to strongest (admin, 5), so that
// a team listed under two personas keeps the stronger role, Diff can tell an
// upgrade from a downgrade, and a forge applying a refused plan can skip its
// downgrades. Unknown (custom) roles rank lowest (0).
func Rank(r Role) int {
	switch r {
	case RolePull:
		return 1
	case RoleTriage:
		return 2
	case RolePush:
		return 3
	case RoleMaintain:
		return 4
	case RoleAdmin:
		return 5
	}
	return 0
}

// grant adds teams at role, keeping the stronger role when a team is already
// present: one team may belong to several personas and must not lose rights
// to the persona listed last.
func grant(teams map[string]Role, role Role, slugs []string) {
	for _, s := range slugs {
		if s == "" {
			continue
		}
		if cur, ok := teams[s]; !ok || Rank(role) > Rank(cur) {
			teams[s] = role
		}
	}
}

// DefaultProtection is the branch protection every fleetbot-managed repo
// carries on its default branch: changes arrive only by pull request, the
// code owners (platform admins for managed paths) must approve, an approval
// goes stale when the PR changes, and history can be neither rewritten nor
// deleted. Together with CODEOWNERS this is what keeps non-platform personas
// out of the paths fleetbot manages.
func DefaultProtection(branch string) *Protection {
	return &Protection{
		Branch:                  branch,
		RequirePullRequest:      true,
		RequireCodeOwnerReviews: true,
		DismissStaleReviews:     true,
		RequiredApprovals:       1,
		AllowForcePushes:        false,
		AllowDeletions:          false,
	}
}

// ClusterRepoAccess is the persona matrix of a cluster repo (DESIGN §1):
// platform admins administer it, cluster admins push to it (they own apps/),
// and the admins of the cluster's workspace may read it, so they can see what
// the platform runs beside their namespace. workspaceAdmins is empty for a
// cluster outside any workspace.
func ClusterRepoAccess(platformAdmins, clusterAdmins, workspaceAdmins []string, branch string) Access {
	teams := map[string]Role{}
	grant(teams, RolePull, workspaceAdmins)
	grant(teams, RolePush, clusterAdmins)
	grant(teams, RoleAdmin, platformAdmins)
	return Access{Teams: teams, Protection: DefaultProtection(branch)}
}

// WorkspaceRepoAccess is the persona matrix of a workspace repo (DESIGN §1):
// platform admins administer it and workspace admins push to it (they own
// apps/ and clusters/*/kustomization.yaml).
func WorkspaceRepoAccess(platformAdmins, workspaceAdmins []string, branch string) Access {
	teams := map[string]Role{}
	grant(teams, RolePush, workspaceAdmins)
	grant(teams, RoleAdmin, platformAdmins)
	return Access{Teams: teams, Protection: DefaultProtection(branch)}
}

// ControlRepoAccess is the access of the control repo itself: only platform
// admins may change what fleetbot fans out, so they are its only team.
func ControlRepoAccess(platformAdmins []string, branch string) Access {
	teams := map[string]Role{}
	grant(teams, RoleAdmin, platformAdmins)
	return Access{Teams: teams, Protection: DefaultProtection(branch)}
}
