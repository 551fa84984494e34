package app

import (
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// RequiredCheck is a status check a branch requires before a pull request merges, bound to the
// GitHub App that must post it (0: any source).
type RequiredCheck = policy.RequiredCheck

// The kinds of repos whose pull requests a tenant check checks.
const (
	// TenantWorkspace is a workspace repo: check workspace's rules (the namespace confinement).
	TenantWorkspace = string(fanout.KindWorkspace)
	// TenantCluster is a cluster repo: check cluster's rules.
	TenantCluster = string(fanout.KindCluster)
)

// Tenant is a workspace or cluster repo of a fleet, with what checking a change to it takes:
// its kind, the workspace or cluster it is named after and, for a workspace, its namespace.
type Tenant struct {
	// Repo is the repo, "owner/name".
	Repo string
	// Kind is TenantWorkspace or TenantCluster.
	Kind string
	// Name is the workspace's or the cluster's name in the control repo.
	Name string
	// Namespace is the workspace's namespace ("" for a cluster repo).
	Namespace string
	// Workspace is what check workspace holds a workspace repo to (its namespace, Pod Security
	// level and the platform's tenant allowlist); zero for a cluster repo.
	Workspace WorkspaceCheck
	// Rendered is what fleetbot renders into the repo (its managed files and scaffolds) by git
	// blob hash: a head's file with one of these hashes need not be read (fleetbot's own pull
	// requests are mostly such files).
	Rendered map[string][]byte
}

// Tenant returns the workspace or cluster repo of f named fullName ("owner/name", in any case),
// as the control repo f was rendered from declares it; false for any other repo (the control
// repo, a management repo, a repo fleetbot does not manage).
func (f *Fleet) Tenant(fullName string) (Tenant, bool) {
	for _, t := range f.Targets {
		if t.Removed || !strings.EqualFold(t.FullName(), fullName) {
			continue
		}
		switch t.Kind {
		case fanout.KindCluster:
			return Tenant{Repo: t.FullName(), Kind: TenantCluster, Name: t.Name, Rendered: rendered(t)}, true
		case fanout.KindWorkspace:
			if wc, ok := WorkspaceCheckOf(f.Repo, t.Name); ok {
				return Tenant{Repo: t.FullName(), Kind: TenantWorkspace, Name: t.Name, Namespace: wc.Namespace, Workspace: wc, Rendered: rendered(t)}, true
			}
		}
	}
	return Tenant{}, false
}

// TenantRepos returns the names ("owner/name") of f's workspace and cluster repos: the repos
// Tenant knows, whose pull requests the tenant check checks (serve's resync recovers the checks
// of their open pull requests).
func (f *Fleet) TenantRepos() []string {
	var out []string
	for _, t := range f.Targets {
		if t.Removed {
			continue
		}
		switch t.Kind {
		case fanout.KindCluster:
			out = append(out, t.FullName())
		case fanout.KindWorkspace:
			if _, ok := WorkspaceCheckOf(f.Repo, t.Name); ok {
				out = append(out, t.FullName())
			}
		}
	}
	return out
}

// rendered is t's files and scaffolds by git blob hash.
func rendered(t *fanout.Target) map[string][]byte {
	sums := t.BlobHashes()
	out := make(map[string][]byte, len(sums))
	for p, h := range sums {
		if c, ok := t.Files[p]; ok {
			out[h] = c
		} else {
			out[h] = t.Scaffolds[p]
		}
	}
	return out
}

// RequireCheck makes the branch protection of every workspace and cluster repo of f require
// check, so that plan shows its absence as access drift and apply adds it. Call it before f is
// shared: it replaces the targets' protection (a copy; nothing else holds it yet).
func (f *Fleet) RequireCheck(check RequiredCheck) {
	for _, t := range f.Targets {
		if (t.Kind == fanout.KindWorkspace || t.Kind == fanout.KindCluster) && t.Access.Protection != nil {
			p := t.Access.Protection.WithCheck(check)
			t.Access.Protection = &p
		}
	}
}

// CheckTenant is check workspace (for a workspace repo) or check cluster (for a cluster repo)
// on files, the repo at a commit by slash-separated path: the same offline check, with t's
// workspace's namespace, Pod Security level and the platform's allowlist. It returns the
// kustomizations it rendered, none when the repo has none, and the problems found, on file and
// line.
func CheckTenant(t Tenant, files map[string][]byte) ([]string, []report.Problem) {
	if t.Kind == TenantWorkspace {
		wc := t.Workspace
		if wc.Workspace == "" {
			wc = WorkspaceCheck{Workspace: t.Name, Namespace: t.Namespace}
		}
		entries, problems := checkWorkspaceFiles(files, wc)
		return entries, reportProblems(problems)
	}
	entries, problems := checkTargetFiles(fanout.KindCluster, files, "", "")
	return entries, reportProblems(problems)
}
