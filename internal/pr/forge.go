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
	"sort"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/report"
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
// writes in this run: the repo is left as it is and picked up by the next run. It is of class
// deferred (report.ClassOf); a forge that knows when the repo fits wraps it in a report.Error
// with that time (report.Outcome.RetryAt).
var ErrDeferred = report.Classify(errors.New("deferred: write budget exhausted"),
	report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted})

// ErrRefMoved is returned (wrapped) by SetBranch and DeleteBranch when the branch is no longer
// at the head the caller read: another writer (a person, another replica of fleetbot) moved it
// since, and the forge wrote nothing. The write was lost, not refused: plan the repo again from
// a fresh snapshot (where a commit someone else pushed to the bot branch blocks the pull
// request). Class retryable, reason RefMoved.
var ErrRefMoved = report.Classify(errors.New("branch moved since it was read"),
	report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonRefMoved})

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
	// SetBranch points branch at sha, as a compare-and-swap on expect: the
	// head the caller read ("" when it read no such branch, which must then
	// not exist). A branch found at any other commit is left as it is, with
	// an error wrapping ErrRefMoved. The move need not be a fast-forward:
	// naming the head it replaces is what keeps it from discarding commits.
	SetBranch(ctx context.Context, owner, repo, branch, sha, expect string) error
	// DeleteBranch deletes branch while it is still at expect, the head the
	// caller read; a branch already gone is not an error, one found at any
	// other commit is left, with an error wrapping ErrRefMoved.
	DeleteBranch(ctx context.Context, owner, repo, branch, expect string) error
	// OpenPR opens a pull request and returns it with its number and URL.
	OpenPR(ctx context.Context, owner, repo string, p NewPR) (*PullRequest, error)
	// EnableAutoMerge enables the forge's auto-merge on open pull request number, as a
	// compare-and-swap on its head: only while the head is still a.HeadSHA (the commit
	// fleetbot pushed); a moved head, or a pull request no longer open, gets nothing, with an
	// error that says why. It reports whether the forge merged the pull request at once
	// instead (GitHub: one already mergeable, under the same rule as OpenPR's AutoMerge). A
	// forge without auto-merge (the local forge: a human merges with git) checks the same and
	// enables nothing. What a held restore needs once fleetbot may merge (Restore).
	EnableAutoMerge(ctx context.Context, owner, repo string, number int, a AutoMergeRequest) (merged bool, err error)
	// UpdatePR rewrites the title and body of an open pull request.
	UpdatePR(ctx context.Context, owner, repo string, number int, title, body string) error
	// ClosePR comments on and closes a pull request without merging it.
	ClosePR(ctx context.Context, owner, repo string, number int, comment string) error
	// Comment adds a comment to a pull request.
	Comment(ctx context.Context, owner, repo string, number int, body string) error
	// Capabilities declares the optional abilities of the forge: callers use
	// what it declares and never guess by type assertion, so a wrapper (a
	// test double, a counting forge) declares exactly what it passes on.
	Capabilities() Capabilities
}

// Capabilities are the optional abilities a forge declares through
// Forge.Capabilities; a nil field is one the forge lacks, and its callers do
// without it.
type Capabilities struct {
	// MergeRecorder records a merge the forge inferred (the local forge: the
	// bot branch merged with plain git); nil when the forge records merges
	// itself (GitHub).
	MergeRecorder MergeRecorder
	// Scanner reads an owner's teams and repos in a few batched requests.
	Scanner Scanner
	// WriteGate checks a repo's writes before they start (snapshot still
	// current, write budget).
	WriteGate WriteGate
	// Codeowners checks the CODEOWNERS on a repo's default branch.
	Codeowners CodeownersChecker
	// Protection reports a default branch that could not be protected.
	Protection ProtectionReporter
	// Rollout reads, for many repos at once, what a wave check needs: fleetbot's newest pull
	// request and its merge commit's statuses.
	Rollout RolloutReader
	// Branches moves several branches of a repo in one write; Apply creates a new repo's
	// default branch and its bot branch with it.
	Branches BranchSetter
	// Restorer reads merge histories and commits an earlier tree again: what an automatic
	// rollback needs (Restore).
	Restorer Restorer
}

// BranchSetter is a forge that moves several branches of one repo in one write (GitHub with
// git push: one push, a command per branch), where SetBranch would write once per branch.
// Apply gives it a new repo's bootstrap branch and bot branch together: one content-creating
// write instead of two.
type BranchSetter interface {
	// SetBranches is SetBranch of each move, in order, as one write; every move is a
	// compare-and-swap as in SetBranch, and a lost one is ErrRefMoved with none applied.
	SetBranches(ctx context.Context, owner, repo string, moves []BranchMove) error
}

// BranchMove is one branch move of SetBranches: Branch to SHA, from Expect ("" absent).
type BranchMove struct {
	Branch, SHA, Expect string
}

// RolloutReader is a forge that reads, in a few batched requests (GitHub: GraphQL, 100 repos a
// query), the newest open or merged fleetbot pull request of each repo and the commit statuses
// of its merge commit: what reconcile needs to gate a rollout in waves (internal/rollout).
type RolloutReader interface {
	// RolloutPRs returns, per repo name of repos (without owner), the newest open or merged
	// pull request from botBranch; a repo without one is absent from the map.
	RolloutPRs(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string]RolloutPR, error)
}

// RolloutPR is a pull request as a wave check sees it.
type RolloutPR struct {
	Number int
	// State is StateOpen or StateMerged.
	State string
	// Source is the control-repo revision the body's marker carries ("" when it has none),
	// and Tree the desired tree it records.
	Source string
	Tree   string
	// Waves are the lists of rollout waves the body's marker records (Options.Waves).
	Waves []string
	// RollbackOf and FailedTree: on a rollback pull request, the revision it rolls back and
	// the tree that revision left in the repo (RollbackOf); "" otherwise.
	RollbackOf, FailedTree string
	// MergedAt and MergeCommit: when and as which commit it was merged (zero while open).
	MergedAt    time.Time
	MergeCommit string
	// Statuses are the merge commit's commit statuses, the newest of each context.
	Statuses []CommitStatus
	// Head is the default branch's head when it moved past the merge commit (a later
	// commit Flux applied instead), and HeadStatuses its statuses; empty otherwise.
	Head         string
	HeadStatuses []CommitStatus
}

// CommitStatus is one commit status (GitHub's StatusContext).
type CommitStatus struct {
	Context   string    `json:"context"`
	State     string    `json:"state"` // StatusSuccess, StatusPending, StatusFailure or StatusError
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Description and TargetURL are what the poster said and linked (Flux: the failing
	// object's message; a link when its Provider has one); for status views.
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"targetUrl,omitempty"`
}

// Failing returns the statuses that fail (failure or error), sorted by context.
func Failing(statuses []CommitStatus) []CommitStatus {
	var out []CommitStatus
	for _, s := range statuses {
		if s.State == StatusFailure || s.State == StatusError {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Context < out[b].Context })
	return out
}

// MergeRecorder is a forge that infers a merge done outside it (the local
// forge: the bot branch pushed or merged into the default branch with plain
// git) and must record it. GitHub records merges itself.
type MergeRecorder interface {
	// RecordMerged marks the pull request merged.
	RecordMerged(ctx context.Context, owner, repo string, number int) error
}

// Scanner is a forge that reads the owner's teams and repos, and every repo's
// branch heads and newest bot pull request, in a few batched requests (GitHub:
// GraphQL, 100 repos a query), so that the Snapshot of an unchanged repo right
// after costs no request. It replaces Org and ListManaged; with only set, it
// reads just those repos and lists no managed repos (as a run limited to some
// repos never removes others).
type Scanner interface {
	Scan(ctx context.Context, owner, defaultBranch, botBranch string, only []string) (policy.Org, []ManagedRepo, error)
}

// WriteGate is a forge that must check something before a repo's writes
// start: the GitHub forge re-reads a pull request known only from its cache
// (errors wrapping ErrStale: plan the repo again) and prices cost against its
// write budget (ErrDeferred: leave the repo for the next run).
type WriteGate interface {
	BeforeWrite(ctx context.Context, owner, repo string, cost Cost) error
}

// CodeownersChecker is a forge that can check the CODEOWNERS file on a repo's
// default branch: GitHub through its errors endpoint, the local forge offline
// with policy.CheckCODEOWNERS.
type CodeownersChecker interface {
	// CodeownersErrors returns the problems of the CODEOWNERS blob (its git
	// hash) on the default branch of owner/repo, whose access is access.
	CodeownersErrors(ctx context.Context, owner, repo, blob string, access policy.Access) ([]policy.CodeownersError, error)
}

// ProtectionReporter is a forge that can learn while writing a repo that its
// default branch cannot be protected (GitHub: a private repository of an
// organization on the free plan): reconcile reports it as a warning of the
// repo, not a failure.
type ProtectionReporter interface {
	// ProtectionUnavailable returns why owner/repo's default branch could not
	// be protected in this run, or "".
	ProtectionUnavailable(owner, repo string) string
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
	// Failing are its failing commit statuses (Flux's failing Kustomization or
	// HelmRelease, with its message and link), sorted by context: for status
	// views, never for decisions, and never cached.
	Failing []CommitStatus `json:"-"`
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

// AutoMergeRequest is auto-merge asked for a pull request already open (Forge.EnableAutoMerge):
// its branch Head into Base, pinned to HeadSHA, merged at once only where Base's protection is
// at least Protection, as NewPR's.
type AutoMergeRequest struct {
	Head, Base, HeadSHA string
	Protection          *policy.Protection
}

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
