package webhook

import (
	"context"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
)

// CheckRuns creates and completes check runs on the control repo.
type CheckRuns interface {
	// Start creates an in-progress check run on commit sha.
	Start(ctx context.Context, sha string) (int64, error)
	// Finish completes check run id with r.
	Finish(ctx context.Context, id int64, r checkrun.Result) error
}

// TenantChecks reads workspace and cluster repos at a commit and writes fleetbot's tenant check
// runs on them, through the installation on each repo's owner.
type TenantChecks interface {
	// Files returns the files of repo ("owner/name") at commit sha, by slash-separated path,
	// within bounds; an error when they cannot be read, whole, inside the repo and the bounds.
	// A file whose git blob hash is a key of rendered has that content, and is not read.
	Files(ctx context.Context, repo, sha string, rendered map[string][]byte) (map[string][]byte, error)
	// Start creates an in-progress tenant check run on commit sha of repo.
	Start(ctx context.Context, repo, sha string) (int64, error)
	// Finish completes check run id of repo with r, with up to checkrun.MaxTenantAnnotations
	// annotations (checkrun.MaxAnnotations per request).
	Finish(ctx context.Context, repo string, id int64, r checkrun.Result) error
}

// RolloutChecks shows a rollout's progress as a check run on the control-repo commit being
// rolled out, updated as the rollout advances.
type RolloutChecks interface {
	// Progress creates or updates the rollout check run on commit sha: in progress while
	// r.Conclusion is empty, completed with r.Conclusion otherwise.
	Progress(ctx context.Context, sha string, r checkrun.Result) error
}
