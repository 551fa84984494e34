package app

import (
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/manifest"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// CheckWorkspaceRepo is check workspace on the workspace repo checkout at dir, offline: it
// renders every clusters/<cluster>/ kustomization, confined to namespace and impersonating
// the ServiceAccount named after workspace. It returns the kustomizations it rendered, empty
// when dir has none (not a workspace repo), and the problems found, on file and line.
func CheckWorkspaceRepo(dir, workspace, namespace string) ([]string, []report.Problem, error) {
	return checkTargetRepo(fanout.KindWorkspace, dir, workspace, namespace)
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

// ObjectCounts is the repo's rendered objects counted by kind, as one line ("3 Deployment,
// 1 Namespace").
func (d DesiredRepo) ObjectCounts() string { return manifest.FormatCounts(d.Objects) }
