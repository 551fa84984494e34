// Package fanout computes, purely from a loaded control repo, the desired
// tree of every target repo: one per cluster and one per workspace. It
// selects components by label selector, renders each catalog app once per
// distinct kustomize input on an in-memory filesystem, substitutes values
// per cluster afterwards, and lays out the files of DESIGN section 3.
package fanout

import (
	"path"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// Kind is the kind of a target repo.
type Kind string

// Target repo kinds.
const (
	KindCluster   Kind = "cluster"
	KindWorkspace Kind = "workspace"
)

// Target is the desired state of one target repo.
type Target struct {
	Kind Kind `json:"kind"`
	// Name is the cluster or workspace name.
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Repo  string `json:"repo"`
	// DefaultBranch and Visibility are used when the repo is created.
	DefaultBranch string `json:"defaultBranch"`
	Visibility    string `json:"visibility"`
	// Files are the managed files and their exact desired content. Any
	// managed path (see Kind.Managed) of the repo that is not in Files is to
	// be deleted.
	Files map[string][]byte `json:"-"`
	// Scaffolds are created only when missing and never touched again.
	Scaffolds map[string][]byte `json:"-"`
	// Access is the persona matrix for this repo (team roles, protection).
	Access policy.Access `json:"access"`
	// Reviewers are the team slugs whose review the PR needs.
	Reviewers []string `json:"reviewers"`
	// Removed is true when the cluster or workspace left the control repo:
	// Files then hold only what stays (README, CODEOWNERS).
	Removed bool `json:"removed,omitempty"`
}

// FullName is "owner/repo".
func (t *Target) FullName() string { return t.Owner + "/" + t.Repo }

// Managed reports whether fleetbot owns path (slash-separated, relative to
// the repo root) in a repo of this kind. Managed paths are rewritten on every
// reconcile; every other path belongs to people and is never touched except
// scaffolds, which are only created when missing.
func (k Kind) Managed(p string) bool {
	p = path.Clean(p)
	switch p {
	case "README.md", ".github/CODEOWNERS":
		return true
	}
	switch k {
	case KindCluster:
		return p == "flux/fleetbot.yaml" || strings.HasPrefix(p, "platform/")
	case KindWorkspace:
		// clusters/<cluster>/fleetbot/...
		parts := strings.SplitN(p, "/", 4)
		return len(parts) == 4 && parts[0] == "clusters" && parts[2] == "fleetbot"
	case KindManagement:
		return managementManaged(p)
	}
	return false
}

// Tombstone is the desired state of the repo of a cluster or workspace that
// left the control repo: every managed file goes away except a README saying
// so and the CODEOWNERS that keeps platform admins in charge. The repo itself
// is kept with its history and the files people own; Flux prunes what the
// removed files described.
func Tombstone(owner string, admins []string, defaultBranch string, kind Kind, name, repo string) *Target {
	removed := "`flux/fleetbot.yaml` and `platform/`"
	if kind == KindWorkspace {
		removed = "`clusters/*/fleetbot/`"
	}
	if kind == KindManagement {
		removed = "`flux/fleetbot.yaml` and `provision/`"
	}
	readme := readmeHeader + "# " + repo + "\n\n" +
		"The " + string(kind) + " **" + name + "** was removed from the fleetbot control repo.\n\n" +
		"fleetbot removed the files it managed here (" + removed + "); Flux prunes the objects they described. " +
		"The repo is kept, with its history and the files people own. " +
		"Platform admins (" + teams(owner, admins, "platform admins") + ") may archive it, or add the " + string(kind) +
		" back to the control repo to resume.\n"
	return &Target{
		Kind: kind, Name: name, Owner: owner, Repo: repo, DefaultBranch: defaultBranch,
		Files: map[string][]byte{
			ReadmePath:     []byte(readme),
			CodeownersPath: policy.CODEOWNERS(owner, []policy.Rule{{Pattern: "*", Teams: admins}}),
		},
		Reviewers: append([]string(nil), admins...),
		Removed:   true,
	}
}
