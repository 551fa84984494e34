package pr

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/manifest"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Action is what fleetbot does (or would do) to one target repo.
type Action string

// Actions, as plan and apply report them.
const (
	// ActionCreate creates the repo (or bootstraps an empty one) and opens
	// the first PR.
	ActionCreate Action = "create"
	// ActionOpen opens a PR.
	ActionOpen Action = "open"
	// ActionUpdate updates the open PR in place (or rebuilds it on a moved
	// base).
	ActionUpdate Action = "update"
	// ActionNoop changes nothing: the repo, or its open PR, already carries
	// the desired tree, and nothing is written.
	ActionNoop Action = "noop"
	// ActionCleanup leaves the content alone (the default branch already
	// carries the desired tree) but tidies up after a pull request that is
	// done: it deletes the bot branch of a merged or closed PR, and records a
	// merge made outside the forge (the local forge's pulls.json). A run that
	// writes is never called noop.
	ActionCleanup Action = "cleanup"
	// ActionBlocked leaves an open PR alone because someone else pushed to
	// the bot branch.
	ActionBlocked Action = "blocked"
	// ActionClose closes the open PR because the default branch already
	// matches the desired state.
	ActionClose Action = "close"
	// ActionRemove opens or updates a PR removing the managed content of a
	// cluster or workspace that left the control repo.
	ActionRemove Action = "remove"
	// ActionRolledBack leaves the repo, and the rollback pull request that restored (or
	// restores) it, alone: the desired tree is the very tree a rollback took away because it
	// failed here (see RollbackOf). A control-repo change that renders something else for the
	// repo is a new rollout and proposes it again.
	ActionRolledBack Action = "rolled-back"
)

// Writes reports whether the action changes the target repo's content or
// its PR. Cleanup writes neither (a branch of a finished PR goes): it counts
// as no change, for exit codes and changed-repo lists alike.
func (a Action) Writes() bool {
	switch a {
	case ActionNoop, ActionCleanup, ActionBlocked, ActionRolledBack:
		return false
	}
	return true
}

// InSync reports whether the action leaves the repo's content as it is because the default
// branch or the open PR already carries the desired tree (noop, cleanup).
func (a Action) InSync() bool { return a == ActionNoop || a == ActionCleanup }

// File operations of a FileChange.
const (
	FileAdded   = "added"
	FileChanged = "changed"
	FileRemoved = "removed"
)

// FileChange is one file the desired tree adds, changes or removes compared
// with the default branch.
type FileChange struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	// OldHash is the blob hash on the default branch (changed, removed).
	OldHash string `json:"-"`
}

// ErrDefaultBranchMissing is returned when a repo has branches but not the
// configured default branch: fleetbot will not guess where to commit.
var ErrDefaultBranchMissing = errors.New("default branch missing")

// Options tune Decide and Apply.
type Options struct {
	// Branch is the bot branch (pullRequests.branch).
	Branch string
	// Labels are added to opened PRs.
	Labels []string
	// Source is the control repo commit the target was rendered from.
	Source string
	// AutoMerge enables auto-merge on opened PRs.
	AutoMerge bool
	// Waves names the lists of rollout waves the source revision rolls out in (a component's
	// own, spec.rollout.waves), recorded in the body's marker: a merged pull request tells
	// later runs which waves its revision took once no cluster's change shows it any more.
	Waves []string
}

// defaultBranch is the target's default branch: fanout sets it from the resolved Fleet; a
// target built by hand without one gets the platform's default.
func defaultBranch(t *fanout.Target) string {
	if t.DefaultBranch == "" {
		return control.DefaultBranch
	}
	return t.DefaultBranch
}

// withDefaults fills the bot branch a caller left unset.
func (o Options) withDefaults() Options {
	if o.Branch == "" {
		o.Branch = control.DefaultPRBranch
	}
	return o
}

// Decision is what to do with one target repo, and why. Decide computes it
// purely from a Snapshot; Apply executes it.
type Decision struct {
	Owner  string      `json:"owner"`
	Repo   string      `json:"repo"`
	Kind   fanout.Kind `json:"kind"`
	Name   string      `json:"name"`
	Action Action      `json:"action"`
	// Reason says in words why Action was chosen.
	Reason string `json:"reason,omitempty"`
	// Base is the default-branch head the decision was made against.
	Base string `json:"base,omitempty"`
	// Tree is the hash of the desired tree.
	Tree string `json:"tree"`
	// Files are the differences between the default branch and the desired
	// tree (for a new repo: every file).
	Files []FileChange `json:"files,omitempty"`
	// Objects are the Kubernetes objects those files add, change or remove;
	// filled by Plan when a PR is to be written.
	Objects manifest.Changes `json:"objects"`
	// PR is the pull request acted upon, when there is one.
	PR *PullRequest `json:"pr,omitempty"`
	// Observed is what the snapshot showed beyond the decision, for status views.
	Observed Observed `json:"observed"`
	// Notes say in words what the change does beyond its files (a
	// management repo: which clusters are created, changed, orphaned or
	// destroyed); the PR body lists them.
	Notes []string `json:"notes,omitempty"`

	// The steps Apply runs, in this order.

	// CreateRepo creates the repo.
	CreateRepo bool `json:"createRepo,omitempty"`
	// Bootstrap is the root commit of the default branch of a new or empty
	// repo: README, CODEOWNERS and scaffolds only.
	Bootstrap []Change `json:"bootstrap,omitempty"`
	// Changes make the bot commit on top of the base; PushBranch commits
	// them and moves the bot branch there from the head the snapshot read
	// (not a fast-forward when the base moved: a compare-and-swap).
	Changes    []Change `json:"changes,omitempty"`
	PushBranch bool     `json:"pushBranch,omitempty"`
	OpenPR     bool     `json:"openPR,omitempty"`
	UpdatePR   bool     `json:"updatePR,omitempty"`
	// Block records on the PR, once, that fleetbot stopped updating it.
	Block bool `json:"block,omitempty"`
	// ClosePR closes PR with a comment; DeleteBranch then deletes the bot
	// branch.
	ClosePR      bool `json:"closePR,omitempty"`
	RecordMerged bool `json:"recordMerged,omitempty"`
	DeleteBranch bool `json:"deleteBranch,omitempty"`

	removed  bool
	baseTree string
	branch   string
	defBr    string
	prFiles  []FileChange
	bot      *Commit
	marker   marker
	// What Cost needs beyond the steps: whether an opened PR gets labels and
	// auto-merge, and the grants and protections of a created repo.
	labels, autoMerge   bool
	grants, protections int
}

// Writes reports whether executing the decision writes anything at all.
func (d *Decision) Writes() bool {
	return d.CreateRepo || len(d.Bootstrap) > 0 || d.PushBranch || d.OpenPR || d.UpdatePR ||
		d.Block || d.ClosePR || d.RecordMerged || d.DeleteBranch
}

// Counts returns how many files are added, changed and removed.
func (d *Decision) Counts() (added, changed, removed int) {
	for _, f := range d.Files {
		switch f.Op {
		case FileAdded:
			added++
		case FileChanged:
			changed++
		case FileRemoved:
			removed++
		}
	}
	return
}

// Decide computes, without any I/O, what to do with the target repo given
// its snapshot: the desired tree is the default branch minus every managed
// path, plus the target's files, plus each scaffold missing on the default
// branch. Equal tree hashes mean nothing to do.
func Decide(s *Snapshot, t *fanout.Target, o Options) (*Decision, error) {
	o = o.withDefaults()
	if err := checkTarget(t); err != nil {
		return nil, err
	}
	var m marker
	if s != nil && s.PR != nil {
		m, _ = parseMarker(s.PR.Body)
	}
	d := newDecision(s, t, o, m)
	switch {
	case !s.Exists || (s.Base == nil && s.Empty):
		return decideBootstrap(d, s, t)
	case s.Base == nil:
		return nil, classify(fmt.Errorf("%s: %w: %q does not exist but the repo has other branches; create it or set platform spec.defaultBranch",
			t.FullName(), ErrDefaultBranchMissing, d.defBr), report.ClassNeedsHuman, report.ReasonDefaultBranchMissing)
	}
	tree, err := desiredTree(s.Files, s.Base.Tree, t)
	if err != nil {
		return nil, fmt.Errorf("%s: desired tree: %w", t.FullName(), err)
	}
	d.Base, d.baseTree, d.Tree = s.Base.SHA, s.Base.Tree, tree
	if rolledBack(d, s, m) {
		return d, nil
	}
	if tree != s.Base.Tree {
		// Equal trees have no difference to list: a repo in sync (most of them, on most
		// runs) skips building the listing again.
		d.Files, d.Changes = diff(s.Files, desiredListing(s.Files, t), t)
	}
	d.prFiles = d.Files
	d.bot = s.Bot
	if p := s.PR; p != nil && p.State == StateOpen {
		decideOpenPR(d, s, t, m, o.Branch)
		return d, nil
	}
	decideWithoutPR(d, s, t, o.Branch)
	return d, nil
}

// rolledBack decides a repo whose newest fleetbot pull request is a rollback (open or merged)
// of a failure that the desired tree repeats: the content that failed here is not proposed
// again, and the rollback pull request is neither updated nor closed. It reports whether it
// decided.
func rolledBack(d *Decision, s *Snapshot, m marker) bool {
	p := s.PR
	if p == nil || p.State == StateClosed || m.Rollback == "" || m.Failed != d.Tree {
		return false
	}
	d.PR, d.marker = p, m
	d.Action = ActionRolledBack
	state := "restores"
	if p.State == StateMerged {
		state = "restored"
	}
	d.Reason = fmt.Sprintf("PR #%d %s the content of %s here: revision %s failed with the tree the control repo renders now; "+
		"a control-repo change that renders something else for this repo starts a new rollout",
		p.Number, state, report.ShortSHA(m.Source), report.ShortSHA(m.Rollback))
	d.Changes = nil
	return true
}

// classify gives err the outcome class and reason every caller acts on (report.Outcome).
func classify(err error, c report.Class, reason string) error {
	return report.Classify(err, report.Outcome{Class: c, Reason: reason})
}

// checkTarget refuses a target whose files are not all paths fleetbot manages in its kind of
// repo, or whose scaffolds are: the desired tree would overwrite what the repo's owners keep,
// or rewrite a scaffold that is theirs once it exists.
func checkTarget(t *fanout.Target) error {
	for p := range t.Files {
		if !t.Kind.Managed(p) {
			return classify(fmt.Errorf("%s: target file %q is not a path fleetbot manages in a %s repo", t.FullName(), p, t.Kind),
				report.ClassInvalidInput, report.ReasonUnmanagedPath)
		}
	}
	for p := range t.Scaffolds {
		if t.Kind.Managed(p) {
			return classify(fmt.Errorf("%s: scaffold %q is a managed path", t.FullName(), p), report.ClassInvalidInput, report.ReasonUnmanagedPath)
		}
	}
	return nil
}

// newDecision is the decision's frame before the repo's state decides its action: who it is
// for, what the snapshot showed for status views, and what Cost prices beyond the steps.
func newDecision(s *Snapshot, t *fanout.Target, o Options, m marker) *Decision {
	d := &Decision{
		Owner: t.Owner, Repo: t.Repo, Kind: t.Kind, Name: t.Name,
		removed: t.Removed, branch: o.Branch, defBr: defaultBranch(t),
		Observed: observe(s, m),
		labels:   len(o.Labels) > 0, autoMerge: o.AutoMerge, grants: len(t.Access.Teams),
	}
	if t.Access.Protection != nil {
		d.protections = 1
	}
	return d
}

// decideBootstrap decides a repo that does not exist or has no branch: its default branch
// starts with one bootstrap commit (README, CODEOWNERS and the scaffolds), and the managed
// content arrives through the first pull request on top, so that it is reviewed like any
// other. A removed target's repo without content has nothing to remove.
func decideBootstrap(d *Decision, s *Snapshot, t *fanout.Target) (*Decision, error) {
	if t.Removed {
		d.Action, d.Reason = ActionNoop, "removed, and the repo has no content"
		d.Tree = gittree.EmptyTree
		return d, nil
	}
	d.CreateRepo = !s.Exists
	d.Action, d.Reason = ActionCreate, "new repo"
	if s.Exists {
		d.Reason = "empty repo: bootstrap the default branch"
	}
	boot := gittree.Listing{}
	hashes := t.BlobHashes()
	for _, p := range []string{"README.md", ".github/CODEOWNERS"} {
		if c, ok := t.Files[p]; ok {
			boot[p] = fileEntry(hashes[p])
			d.Bootstrap = append(d.Bootstrap, Change{Path: p, Mode: gittree.ModeFile, Content: c})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(t.Scaffolds)) {
		boot[p] = fileEntry(hashes[p])
		d.Bootstrap = append(d.Bootstrap, Change{Path: p, Mode: gittree.ModeFile, Content: t.Scaffolds[p]})
	}
	sortChanges(d.Bootstrap)
	desired := desiredListing(boot, t)
	tree, err := t.Hasher().Hash(desired)
	if err != nil {
		return nil, fmt.Errorf("%s: desired tree: %w", t.FullName(), err)
	}
	d.Tree = tree
	d.Files, _ = diff(gittree.Listing{}, desired, t)
	d.prFiles, d.Changes = diff(boot, desired, t)
	if len(d.Changes) > 0 {
		d.PushBranch, d.OpenPR = true, true
	}
	return d, nil
}

// decideOpenPR decides a repo with fleetbot's pull request open: leave it to the human who
// pushed to its branch, close it once the default branch matches, or bring its branch and
// description up to date. The open pull request is always the one acted on.
func decideOpenPR(d *Decision, s *Snapshot, t *fanout.Target, m marker, branch string) {
	p, inSync := s.PR, d.Tree == s.Base.Tree
	d.PR, d.marker = p, m
	switch {
	case m.Blocked:
		d.Action = ActionBlocked
		d.Reason = fmt.Sprintf("PR #%d is blocked: someone else pushed to %s; fleetbot no longer updates it", p.Number, branch)
	case s.Bot == nil && inSync:
		d.Action, d.ClosePR = ActionClose, true
		d.Reason = fmt.Sprintf("%s already matches and branch %s is gone", d.defBr, branch)
	case s.Bot == nil:
		d.Action, d.PushBranch, d.UpdatePR = updateAction(t), true, true
		d.Reason = fmt.Sprintf("branch %s is missing: rebuild it", branch)
	case !ours(s.Bot, m):
		d.Action, d.Block = ActionBlocked, true
		d.Reason = fmt.Sprintf("commit %s on %s was not made by fleetbot: PR #%d is left alone", report.ShortSHA(s.Bot.SHA), branch, p.Number)
	case inSync:
		d.Action, d.ClosePR, d.DeleteBranch = ActionClose, true, true
		d.Reason = fmt.Sprintf("%s already matches the desired state", d.defBr)
	case s.Bot.Tree == d.Tree && firstParent(s.Bot) == s.Base.SHA && m.Head == s.Bot.SHA:
		d.Action, d.Reason = ActionNoop, fmt.Sprintf("PR #%d already carries the desired tree", p.Number)
	case s.Bot.Tree == d.Tree && firstParent(s.Bot) == s.Base.SHA:
		d.Action, d.UpdatePR = updateAction(t), true
		d.Reason = fmt.Sprintf("PR #%d carries the desired tree; refresh its description", p.Number)
	case firstParent(s.Bot) != s.Base.SHA:
		d.Action, d.PushBranch, d.UpdatePR = updateAction(t), true, true
		d.Reason = fmt.Sprintf("%s moved: rebuild PR #%d on %s", d.defBr, p.Number, report.ShortSHA(s.Base.SHA))
	default:
		d.Action, d.PushBranch, d.UpdatePR = updateAction(t), true, true
		d.Reason = fmt.Sprintf("desired state changed: update PR #%d", p.Number)
	}
	if d.Action == ActionBlocked || d.Action == ActionClose {
		d.Changes = nil
	}
}

// decideWithoutPR decides a repo with no open pull request of fleetbot's: record a merge done
// by hand, delete the branch of a closed or merged pull request once the default branch
// matches, or open a pull request (removing the managed content of a removed target).
func decideWithoutPR(d *Decision, s *Snapshot, t *fanout.Target, branch string) {
	if p := s.PR; p != nil && p.State == StateMerged && p.Inferred {
		d.RecordMerged, d.PR = true, p
	}
	if d.Tree == s.Base.Tree {
		d.Action, d.Reason = ActionNoop, fmt.Sprintf("%s already matches", d.defBr)
		d.Changes = nil
		if s.Bot != nil && s.PR != nil && s.PR.State != StateOpen && s.Bot.SHA == s.PR.HeadSHA {
			d.DeleteBranch, d.PR = true, s.PR
			d.Reason += fmt.Sprintf("; delete branch %s of %s PR #%d", branch, s.PR.State, s.PR.Number)
		}
		if d.DeleteBranch || d.RecordMerged {
			d.Action = ActionCleanup
		}
		return
	}
	d.Action, d.PushBranch, d.OpenPR = ActionOpen, true, true
	d.Reason = "desired state differs from " + d.defBr
	if t.Removed {
		d.Action, d.Reason = ActionRemove, "removed from the control repo: remove its managed content"
	}
}

// updateAction is the action of updating the open pull request: a removal's stays a removal.
func updateAction(t *fanout.Target) Action {
	if t.Removed {
		return ActionRemove
	}
	return ActionUpdate
}

// ours reports whether the bot branch head is fleetbot's own commit: the one
// recorded in the PR marker, or (after a run interrupted between the branch
// move and the PR update) a single-parent commit whose tree is the one its
// TrailerTree names. Content, not identity: who committed and whether it is
// signed differ between an App, a token and GHES, and prove nothing fleetbot
// controls. Whoever makes a commit whose tree is exactly what fleetbot
// rendered proposes nothing fleetbot would not; any other edit changes the
// tree and no longer matches its trailer.
func ours(c *Commit, m marker) bool {
	if m.Head != "" && c.SHA == m.Head {
		return true
	}
	tree := trailer(c.Message, TrailerTree)
	return tree != "" && tree == c.Tree && len(c.Parents) == 1
}

// firstParent is the commit a bot commit was made on ("" for none): the base it was built on.
func firstParent(c *Commit) string {
	if c == nil || len(c.Parents) == 0 {
		return ""
	}
	return c.Parents[0]
}

// desiredTree is the hash of desiredListing(base, t), base being the listing of the tree
// baseTree. It is remembered in the target's hash cache under baseTree and the target's kind,
// files and scaffolds (everything the listing depends on): a service plans each repo on every
// event of it, against the same default branch almost every time.
func desiredTree(base gittree.Listing, baseTree string, t *fanout.Target) (string, error) {
	compute := func() (string, error) { return t.Hasher().Hash(desiredListing(base, t)) }
	if baseTree == "" || t.Hasher() == nil {
		return compute()
	}
	return t.Hasher().Memo(desiredKey(baseTree, t), compute)
}

// desiredKey names the desired tree of t on the base tree baseTree: the base, t's kind (which
// paths it manages), and the path and blob hash of every file and scaffold (Target.ContentKey).
func desiredKey(baseTree string, t *fanout.Target) string {
	return "desired\x00" + baseTree + "\x00" + string(t.Kind) + t.ContentKey()
}

// desiredListing is the desired tree as a listing: the base without the paths fleetbot manages,
// the target's files, and each scaffold the base does not have yet.
func desiredListing(base gittree.Listing, t *fanout.Target) gittree.Listing {
	desired := make(gittree.Listing, len(base)+len(t.Files))
	for p, e := range base {
		if !t.Kind.Managed(p) {
			desired[p] = e
		}
	}
	hashes := t.BlobHashes()
	for p := range t.Files {
		desired[p] = fileEntry(hashes[p])
	}
	for p := range t.Scaffolds {
		if _, ok := base[p]; !ok {
			desired[p] = fileEntry(hashes[p])
		}
	}
	return desired
}

// diff lists the files that differ between from and to, and the changes that
// turn from into to (content taken from the target).
func diff(from, to gittree.Listing, t *fanout.Target) ([]FileChange, []Change) {
	var files []FileChange
	var changes []Change
	for _, p := range to.Paths() {
		e := to[p]
		old, ok := from[p]
		if ok && old == e {
			continue
		}
		op := FileAdded
		if ok {
			op = FileChanged
		}
		content, found := t.Files[p]
		if !found {
			content = t.Scaffolds[p]
		}
		files = append(files, FileChange{Path: p, Op: op, OldHash: old.Hash})
		changes = append(changes, Change{Path: p, Mode: e.Mode, Content: content})
	}
	for _, p := range from.Paths() {
		if _, ok := to[p]; !ok {
			files = append(files, FileChange{Path: p, Op: FileRemoved, OldHash: from[p].Hash})
			changes = append(changes, Change{Path: p, Delete: true})
		}
	}
	sort.Slice(files, func(a, b int) bool { return files[a].Path < files[b].Path })
	sortChanges(changes)
	return files, changes
}

// sortChanges orders changes by path, so a commit and its listing are the same on every run.
func sortChanges(cs []Change) {
	sort.Slice(cs, func(a, b int) bool { return cs[a].Path < cs[b].Path })
}

// fileEntry is the tree entry of a regular file with blob hash h.
func fileEntry(h string) gittree.Entry {
	return gittree.Entry{Mode: gittree.ModeFile, Hash: h}
}
