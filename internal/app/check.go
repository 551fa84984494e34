package app

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// CheckWorkspaceRepo is check workspace on the workspace repo checkout at dir, offline: it
// renders every clusters/<cluster>/ kustomization, confined to namespace and impersonating
// the ServiceAccount named after workspace, at the Pod Security level restricted and with the
// default tenant allowlist (CheckWorkspaceRepoWith takes the workspace's own). It returns the
// kustomizations it rendered, empty when dir has none (not a workspace repo), and the problems
// found, on file and line.
func CheckWorkspaceRepo(dir, workspace, namespace string) ([]string, []report.Problem, error) {
	return CheckWorkspaceRepoWith(dir, WorkspaceCheck{Workspace: workspace, Namespace: namespace})
}

// WorkspaceCheck is what check workspace holds a workspace repo to.
type WorkspaceCheck struct {
	// Workspace names the workspace (and its ServiceAccount); Namespace is its namespace
	// ("": the workspace's name).
	Workspace, Namespace string
	// PodSecurity is the namespace's Pod Security level ("": restricted).
	PodSecurity string
	// Allow extends the default tenant allowlist (platform.yaml spec.tenants.allow).
	Allow []control.TenantKind
}

// WorkspaceCheckOf is the check of workspace name as the control repo defines it: its
// namespace, its Pod Security level and the platform's allowlist. ok is false when the repo has
// no such workspace.
func WorkspaceCheckOf(repo *control.Repo, name string) (WorkspaceCheck, bool) {
	w := repo.Workspace(name)
	if w == nil {
		return WorkspaceCheck{}, false
	}
	wc := WorkspaceCheck{Workspace: name, Namespace: w.Namespace(), PodSecurity: w.PodSecurityLevel()}
	if repo.Platform != nil {
		wc.Allow = repo.Platform.Spec.Tenants.Allow
	}
	return wc, true
}

// ParseTenantKind reads a kind of the tenant allowlist written Kind.group (Kind alone for the
// core group), as check workspace's --allow takes it.
func ParseTenantKind(s string) (control.TenantKind, error) {
	kind, group, _ := strings.Cut(s, ".")
	if kind == "" {
		return control.TenantKind{}, fmt.Errorf("--allow %q: write the kind as Kind.group (ServiceMonitor.monitoring.coreos.com), or Kind for the core group", s)
	}
	return control.TenantKind{APIGroup: group, Kind: kind}, nil
}

// CheckWorkspaceRepoWith is CheckWorkspaceRepo with the workspace's own Pod Security level and
// the platform's allowlist.
func CheckWorkspaceRepoWith(dir string, wc WorkspaceCheck) ([]string, []report.Problem, error) {
	if wc.Namespace == "" {
		wc.Namespace = wc.Workspace
	}
	switch wc.PodSecurity {
	case "", control.PodSecurityRestricted, control.PodSecurityBaseline:
	default:
		return nil, nil, fmt.Errorf("--pod-security %q: a workspace namespace is restricted or baseline (never privileged)", wc.PodSecurity)
	}
	files, err := workcopy.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, problems := checkWorkspaceFiles(files, wc)
	return entries, reportProblems(problems), nil
}

// checkWorkspaceFiles is check workspace on a workspace repo's files by slash-separated path
// (a checkout, or a commit serve read through the GitHub API), held to wc.
func checkWorkspaceFiles(files map[string][]byte, wc WorkspaceCheck) ([]string, []fanout.RepoProblem) {
	if wc.Namespace == "" {
		wc.Namespace = wc.Workspace
	}
	c := fanout.RepoCheck{Entries: entriesUnder(files, "clusters", true), Namespace: wc.Namespace, ServiceAccount: wc.Workspace,
		PodSecurity: wc.PodSecurity, Allow: wc.Allow}
	if len(c.Entries) == 0 {
		return nil, nil
	}
	return c.Entries, fanout.CheckRepo(files, c)
}

// CheckClusterRepo is check cluster on the cluster repo checkout at dir, offline: it renders
// apps/. It returns the kustomizations it rendered, empty when dir has none (not a cluster
// repo), and the problems found, on file and line.
func CheckClusterRepo(dir string) ([]string, []report.Problem, error) {
	return checkTargetRepo(fanout.KindCluster, dir, "", "")
}

func checkTargetRepo(kind fanout.Kind, dir, workspace, namespace string) ([]string, []report.Problem, error) {
	entries, problems, err := CheckTargetRepo(kind, dir, workspace, namespace)
	if err != nil {
		return nil, nil, err
	}
	return entries, reportProblems(problems), nil
}

// reportProblems are a repo check's problems as the report carries them.
func reportProblems(problems []fanout.RepoProblem) []report.Problem {
	out := make([]report.Problem, 0, len(problems))
	for _, p := range problems {
		out = append(out, report.Problem{File: p.File, Line: p.Line, Object: p.Object, Message: p.Message, Hint: p.Hint})
	}
	return out
}

// entriesUnder lists the kustomization directories to render: top itself,
// or with perChild each top/<name>/ holding a kustomization.
func entriesUnder(files map[string][]byte, top string, perChild bool) []string {
	seen := map[string]bool{}
	for p := range files {
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		switch name {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			continue
		}
		if (perChild && path.Dir(dir) == top) || (!perChild && dir == top) {
			seen[dir] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// CheckTargetRepo is check workspace / check cluster on the target repo checkout at dir,
// offline: for a workspace repo (kind fanout.KindWorkspace) it renders every
// clusters/<cluster>/ kustomization, confined to namespace and impersonating the
// ServiceAccount named after workspace; for a cluster repo it renders apps/. It returns the
// kustomizations it rendered, empty when dir has none of that kind's (not a repo of that
// kind), and the problems found.
func CheckTargetRepo(kind fanout.Kind, dir, workspace, namespace string) ([]string, []fanout.RepoProblem, error) {
	files, err := workcopy.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, problems := checkTargetFiles(kind, files, workspace, namespace)
	return entries, problems, nil
}

// checkTargetFiles is CheckTargetRepo on the repo's files, by slash-separated path (a
// checkout read by workcopy.ReadDir, or a commit read through the GitHub API by serve).
func checkTargetFiles(kind fanout.Kind, files map[string][]byte, workspace, namespace string) ([]string, []fanout.RepoProblem) {
	c := fanout.RepoCheck{Entries: entriesUnder(files, "apps", false)}
	if kind == fanout.KindWorkspace {
		c = fanout.RepoCheck{Entries: entriesUnder(files, "clusters", true), Namespace: namespace, ServiceAccount: workspace}
	}
	if len(c.Entries) == 0 {
		return nil, nil
	}
	return c.Entries, fanout.CheckRepo(files, c)
}
