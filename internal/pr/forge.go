// Package pr turns the desired tree of a target repo into one pull request
// on that repo: it decides, from one snapshot of the repo, whether anything
// must change (comparing git tree hashes computed locally), and then
// creates, updates, rebuilds or closes the fleetbot PR, leaving every path
// fleetbot does not manage alone.
//
// The decision is a pure function (Decide) over plain values; Apply executes
// a decision through the small Forge interface defined here, which the local
// (git on disk) and GitHub forges implement.
package pr

import (
	"context"
	"errors"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// PR states as the forge reports them.
const (
	StateOpen   = "open"
	StateClosed = "closed"
	StateMerged = "merged"
)

// ErrNotFound is returned by forges for a repo, branch, PR or object that
// does not exist.
var ErrNotFound = errors.New("not found")

// ErrDeferred is returned (wrapped) by forges whose write budget cannot afford a repo's
// writes in this run: the repo is left as it is and picked up by the next run.
var ErrDeferred = errors.New("deferred: write budget exhausted")

// ErrStale is returned (wrapped) by forges that find, before writing, that the snapshot a
// decision was made on is out of date (a pull request closed by hand): plan again.
var ErrStale = errors.New("snapshot out of date")

// Forge is what the pr package needs from a code host. A GitHub
// implementation can serve Snapshot with one (conditional) read in the
// common case, and Commit + SetBranch + Open/Update with 3-4 writes.
type Forge interface {
	// Snapshot reads, in one go, what Decide needs: whether the repo exists,
	// the default branch head and its flat tree listing, the bot branch head
	// and the latest PR whose head is the bot branch.
	Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*Snapshot, error)
	// Blob returns the content of one blob, for the object diff of changed
	// files.
	Blob(ctx context.Context, owner, repo, hash string) ([]byte, error)
	// CreateRepo creates an empty repo with its access settings.
	CreateRepo(ctx context.Context, spec RepoSpec) error
	// Commit writes one tree (baseTree plus changes) and one commit on top of
	// parent (empty for a root commit). It does not move any branch.
	Commit(ctx context.Context, owner, repo string, c NewCommit) (Commit, error)
	// SetBranch points branch at sha, creating it when missing. Without
	// force, the move must be a fast-forward.
	SetBranch(ctx context.Context, owner, repo, branch, sha string, force bool) error
	// DeleteBranch deletes a branch; a missing branch is not an error.
	DeleteBranch(ctx context.Context, owner, repo, branch string) error
	// OpenPR opens a pull request and returns it with its number and URL.
	OpenPR(ctx context.Context, owner, repo string, p NewPR) (*PullRequest, error)
	// UpdatePR rewrites the title and body of an open pull request.
	UpdatePR(ctx context.Context, owner, repo string, number int, title, body string) error
	// ClosePR comments on and closes a pull request without merging it.
	ClosePR(ctx context.Context, owner, repo string, number int, comment string) error
	// Comment adds a comment to a pull request.
	Comment(ctx context.Context, owner, repo string, number int, body string) error
}

// MergeRecorder is implemented by forges that infer a merge done outside
// them (the local forge: the bot branch pushed or merged into the default
// branch with plain git) and must record it. GitHub records merges itself.
type MergeRecorder interface {
	// RecordMerged marks the pull request merged.
	RecordMerged(ctx context.Context, owner, repo string, number int) error
}

// Snapshot is the state of one target repo that Decide needs.
type Snapshot struct {
	// Exists is false when the repo does not exist yet.
	Exists bool
	// Empty is true when the repo exists but has no branch at all.
	Empty bool
	// Base is the head commit of the default branch; nil when missing.
	Base *Commit
	// Files is the flat tree listing of Base.
	Files gittree.Listing
	// Bot is the head commit of the bot branch; nil when missing.
	Bot *Commit
	// PR is the latest pull request from the bot branch into the default
	// branch, in any state; nil when there never was one.
	PR *PullRequest
	// Merged is the control-repo revision of the newest merged fleetbot
	// pull request, when the forge saw one while reading PR ("" when unknown):
	// for status views, never for decisions.
	Merged string
}

// Commit is a commit as the forge reports it.
type Commit struct {
	SHA     string   `json:"sha"`
	Tree    string   `json:"tree"`
	Parents []string `json:"parents,omitempty"`
	Message string   `json:"message,omitempty"`
	// Status is the commit's combined status and checks as the forge last
	// read them (StatusSuccess, ...; "" when the forge cannot tell): for
	// status views, never for decisions, and never cached.
	Status string `json:"-"`
}

// Combined commit states of Commit.Status (GitHub's StatusState, lower case).
const (
	StatusSuccess = "success"
	StatusPending = "pending"
	StatusFailure = "failure"
	StatusError   = "error"
)

// Change is one file written or deleted by a commit.
type Change struct {
	Path    string       `json:"path"`
	Mode    gittree.Mode `json:"mode,omitempty"`
	Content []byte       `json:"-"`
	// Delete removes Path instead of writing it.
	Delete bool `json:"delete,omitempty"`
}

// NewCommit is a commit to write.
type NewCommit struct {
	// Parent is the parent commit; empty for the root commit of a new repo.
	Parent string
	// BaseTree is the tree the changes apply to; empty for an empty tree.
	BaseTree string
	Changes  []Change
	Message  string
}

// PullRequest is a pull request as the forge reports it.
type PullRequest struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	// Head and Base are branch names.
	Head  string `json:"head"`
	Base  string `json:"base"`
	Title string `json:"title"`
	Body  string `json:"body"`
	URL   string `json:"url,omitempty"`
	// HeadSHA is the head commit as last known to the forge.
	HeadSHA string `json:"headSha,omitempty"`
	// Inferred is true when the forge inferred State (a merge done outside
	// it) and has not recorded it yet; see MergeRecorder.
	Inferred bool `json:"-"`
	// CreatedAt is when the pull request was opened (zero when unknown).
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Review is GitHub's review decision (ReviewApproved, ...; "" when the
	// forge cannot tell): for status views, never for decisions.
	Review string `json:"-"`
}

// Review decisions of PullRequest.Review (GitHub's PullRequestReviewDecision, lower case).
const (
	ReviewApproved         = "approved"
	ReviewChangesRequested = "changes_requested"
	ReviewRequired         = "review_required"
)

// NewPR is a pull request to open.
type NewPR struct {
	Head   string
	Base   string
	Title  string
	Body   string
	Labels []string
	// AutoMerge enables the forge's auto-merge on the new pull request
	// (platform pullRequests.merge: auto).
	AutoMerge bool
	// HeadSHA is the commit fleetbot pushed to Head. A forge adopts an
	// existing pull request from Head only when it is fleetbot's, and merges
	// (or enables auto-merge on) a pull request only while its head is this
	// commit: a commit someone else pushed to Head is never merged unreviewed.
	HeadSHA string
	// Protection is the protection fleetbot wants on Base: a pull request
	// GitHub reports mergeable at once is merged directly only when Base's
	// protection is at least this (nil: never).
	Protection *policy.Protection
}

// RepoSpec describes a target repo to create.
type RepoSpec struct {
	Owner         string
	Repo          string
	Kind          fanout.Kind
	Name          string
	DefaultBranch string
	Visibility    string
	Access        policy.Access
}

// ManagedRepo is a target repo the forge knows fleetbot manages, found
// without the control repo (used to detect removed clusters and workspaces).
type ManagedRepo struct {
	Kind fanout.Kind `json:"kind"`
	Name string      `json:"name"`
	Repo string      `json:"repo"`
}
