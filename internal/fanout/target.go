// Package fanout computes, purely from a loaded control repo, the desired
// tree of every target repo: one per cluster and one per workspace. It
// selects components by label selector, renders each catalog app once per
// distinct kustomize input on an in-memory filesystem, substitutes values
// per cluster afterwards, and lays out the files of DESIGN section 3.
package fanout

import (
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/gittree"
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

	// hashes caches the blob hashes BlobHashes computed, by path, with the content each was
	// computed of; sums and key are BlobHashes' and ContentKey's answers while every file is
	// still the content they were computed of.
	hashMu sync.Mutex
	hashes map[string]hashed
	sums   map[string]string
	key    string
	// hasher is the hash cache of the Renderer that rendered the target (nil: none).
	hasher *gittree.Cache
}

// Hasher returns the git hash cache of the Renderer that rendered t, shared by every target
// it rendered; nil (which computes every hash) for a target built otherwise.
func (t *Target) Hasher() *gittree.Cache { return t.hasher }

// hashed is a blob hash and the content it is the hash of.
type hashed struct {
	data []byte
	hash string
}

// same reports whether a and b are the same slice: content is replaced, never changed in place
// (Render's contract), so the same slice holds the same bytes. The cache holds on to the
// slice it hashed, so its array cannot be freed and reused for other content meanwhile.
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// BlobHashes returns the git blob hash of every file and scaffold of t, by path; the map is
// shared: do not change it. Each file is hashed once for as long as its content stays the
// same slice: a service plans the same rendered target on every event of its repo, and hashing
// its files was the larger part of each plan. It is safe for concurrent use.
func (t *Target) BlobHashes() map[string]string {
	t.hashMu.Lock()
	defer t.hashMu.Unlock()
	t.refresh()
	return t.sums
}

// ContentKey names t's files and scaffolds: their paths and blob hashes, files apart from
// scaffolds. Two targets with the same key hold the same content at the same paths.
func (t *Target) ContentKey() string {
	t.hashMu.Lock()
	defer t.hashMu.Unlock()
	t.refresh()
	if t.key == "" {
		var b strings.Builder
		for _, files := range []map[string][]byte{t.Files, t.Scaffolds} {
			b.WriteString("\x00\x00")
			for _, p := range slices.Sorted(maps.Keys(files)) {
				b.WriteString(p)
				b.WriteByte(0)
				b.WriteString(t.sums[p])
				b.WriteByte(0)
			}
		}
		t.key = b.String()
	}
	return t.key
}

// refresh brings sums up to date with the files, hashing what changed; call with t.hashMu held.
func (t *Target) refresh() {
	if t.fresh() {
		return
	}
	if t.hashes == nil {
		t.hashes = make(map[string]hashed, len(t.Files)+len(t.Scaffolds))
	}
	sums := make(map[string]string, len(t.Files)+len(t.Scaffolds))
	for _, files := range []map[string][]byte{t.Scaffolds, t.Files} {
		for p, c := range files {
			h, ok := t.hashes[p]
			if !ok || !same(h.data, c) {
				h = hashed{data: c, hash: t.hasher.BlobHash(c)}
				t.hashes[p] = h
			}
			sums[p] = h.hash
		}
	}
	t.sums, t.key = sums, ""
}

// fresh reports whether sums answers for the files as they are: the same paths, each the same
// slice it was hashed from; call with t.hashMu held.
func (t *Target) fresh() bool {
	if t.sums == nil || len(t.sums) != len(t.Files)+len(t.Scaffolds) {
		return false
	}
	for _, files := range []map[string][]byte{t.Files, t.Scaffolds} {
		for p, c := range files {
			h, ok := t.hashes[p]
			if !ok || !same(h.data, c) {
				return false
			}
			if _, ok := t.sums[p]; !ok {
				return false
			}
		}
	}
	return true
}

// Clone returns a deep copy of t that may be changed (its hashes are computed afresh). A
// Target is never copied by value: its computed hashes would go with it.
func (t *Target) Clone() *Target {
	c := &Target{Kind: t.Kind, Name: t.Name, Owner: t.Owner, Repo: t.Repo, DefaultBranch: t.DefaultBranch,
		Visibility: t.Visibility, Files: maps.Clone(t.Files), Scaffolds: maps.Clone(t.Scaffolds),
		Access: t.Access.Clone(), Reviewers: slices.Clone(t.Reviewers), Removed: t.Removed, hasher: t.hasher}
	return c
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
