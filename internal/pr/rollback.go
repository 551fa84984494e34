package pr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TrailerRollback is the commit trailer of a rollback commit naming the control-repo revision
// it rolls back.
const TrailerRollback = "Fleetbot-Rollback"

// HistoryDepth is how many of a repo's newest merged fleetbot pull requests a rollback reads:
// the last healthy one is almost always among the newest few.
const HistoryDepth = 10

// Restorer is a forge that can roll a repo back: it reads what fleetbot merged in many repos
// at once, and commits a tree the repo already holds as a new commit (GitHub: the Git Data
// API's commit of an existing tree, no blob uploaded).
type Restorer interface {
	// MergeHistory returns, per repo name of repos (without owner), at most HistoryDepth of
	// the newest merged fleetbot pull requests from botBranch into defaultBranch, oldest
	// first; a repo without one (or that does not exist) is absent.
	MergeHistory(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string][]MergedPR, error)
	// CommitTree writes one commit of tree, an existing tree of the repo, on parent. It moves
	// no branch.
	CommitTree(ctx context.Context, owner, repo string, c TreeCommit) (Commit, error)
}

// TreeCommit is a commit of an existing tree.
type TreeCommit struct {
	Parent, Tree, Message string
}

// MergedPR is one merged fleetbot pull request of a repo, as a rollback reads it.
type MergedPR struct {
	Number int
	// Source is the control-repo revision its marker carries, Tree the tree it recorded.
	Source, Tree string
	// RollbackOf is, for a rollback pull request, the revision it rolled back.
	RollbackOf string
	MergedAt   time.Time
	// MergeCommit is the commit it left on the default branch, MergeTree that commit's tree
	// (what a rollback restores), Statuses that commit's newest status of each context.
	MergeCommit, MergeTree string
	Statuses               []CommitStatus
}

// RollbackOf returns, for a rollback pull request's body, the revision it rolls back and the
// tree that revision left in the repo; "" for any other body.
func RollbackOf(body string) (revision, failedTree string) {
	m, _ := parseMarker(body)
	return m.Rollback, m.Failed
}

// RestoreRequest is one repo of a rollback: put back the tree of the last revision that was
// healthy there.
type RestoreRequest struct {
	Target *fanout.Target
	// Branch is the bot branch, Labels the labels of an opened pull request.
	Branch string
	Labels []string
	// Failed is the revision rolled back and FailedTree the tree it left in the repo.
	Failed, FailedTree string
	// To is the revision restored and Tree its tree in the repo.
	To, Tree string
	// Why says why the revision is rolled back (the rollout's halt).
	Why string
	// AutoMerge enables auto-merge on the pull request (the wave's merge policy).
	AutoMerge bool
	// Held: the wave merges automatically but fleetbot may not merge now (a pause, the change
	// windows): the pull request opens without auto-merge, marked held, and the first Restore
	// with AutoMerge enables auto-merge on that same pull request (Forge.EnableAutoMerge) and
	// drops the mark.
	Held bool
}

// Restored is what Restore did.
type Restored struct {
	Number int
	URL    string
	// Done says what happened, in words: opened, updated, already open, already restored,
	// auto-merge enabled (on a held restore), merged (a held restore the forge merged at once
	// instead).
	Done string
}

// ErrRestoreBlocked is returned by Restore when someone else's commit is on the bot branch of
// an open pull request: the rollback would discard it, so a human decides.
var ErrRestoreBlocked = report.Classify(errors.New("rollback blocked: a commit fleetbot did not make is on the bot branch"),
	report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonHumanCommitOnBranch})

// ErrRestoreClosed is returned by Restore when a human closed the repo's rollback pull request
// of the same restore without merging it: fleetbot respects that and neither reopens nor
// recreates it, so a human decides (merge a restore by hand, or change the control repo).
var ErrRestoreClosed = report.Classify(errors.New("rollback pull request closed without merging"),
	report.Outcome{Class: report.ClassNeedsHuman, Reason: ReasonRestoreClosed})

// ReasonRestoreClosed is the machine reason (report.Outcome) of ErrRestoreClosed.
const ReasonRestoreClosed = "RestoreClosed"

// Restore opens (or turns an open pull request of the bot branch into) the rollback pull
// request of one repo: a commit whose tree is r.Tree on the default branch's head, on the
// bot branch (a compare-and-swap from the head the snapshot read), and a pull request that
// says what is rolled back and why. The forge must declare a Restorer. A rollback pull
// request already open for the same restore, and a default branch that already holds the
// tree, are left as they are.
func Restore(ctx context.Context, f Forge, r RestoreRequest) (Restored, error) {
	t := r.Target
	rs := f.Capabilities().Restorer
	if rs == nil {
		return Restored{}, fmt.Errorf("%s: this forge cannot commit an earlier tree (it declares no Restorer): roll back with a control-repo revert", t.FullName())
	}
	s, err := f.Snapshot(ctx, t.Owner, t.Repo, defaultBranch(t), r.Branch)
	if err != nil {
		return Restored{}, fmt.Errorf("%s: reading the repo to roll back: %w", t.FullName(), err)
	}
	done, ok, err := restoreDone(s, r)
	switch {
	case err != nil:
		return done, err
	case ok && done.Done == "already open" && r.AutoMerge:
		if m, _ := parseMarker(s.PR.Body); m.Held {
			return releaseHeld(ctx, f, r, s, m)
		}
		return done, nil
	case ok:
		return done, nil
	}
	open := s.PR != nil && s.PR.State == StateOpen
	cost := Cost{Commits: 1, BranchMoves: 1, PROpens: 1}
	if open {
		cost = Cost{Commits: 1, BranchMoves: 1, PRUpdates: 1}
	} else if r.AutoMerge {
		cost.AutoMerge = 1
	}
	if wg := f.Capabilities().WriteGate; wg != nil {
		if err := wg.BeforeWrite(ctx, t.Owner, t.Repo, cost); err != nil {
			return Restored{}, fmt.Errorf("%s: %w", t.FullName(), err)
		}
	}
	c, err := rs.CommitTree(ctx, t.Owner, t.Repo, TreeCommit{Parent: s.Base.SHA, Tree: r.Tree, Message: restoreMessage(r)})
	if err != nil {
		return Restored{}, fmt.Errorf("%s: committing the tree of %s: %w", t.FullName(), report.ShortSHA(r.To), err)
	}
	expect := ""
	if s.Bot != nil {
		expect = s.Bot.SHA
	}
	if err := f.SetBranch(ctx, t.Owner, t.Repo, r.Branch, c.SHA, expect); err != nil {
		return Restored{}, fmt.Errorf("%s: moving %s to the rollback commit: %w", t.FullName(), r.Branch, err)
	}
	nm := marker{Head: c.SHA, Base: s.Base.SHA, Tree: r.Tree, Source: r.To, Rollback: r.Failed, Failed: r.FailedTree, Held: r.Held && !r.AutoMerge}
	return writeRestorePR(ctx, f, r, s, c, nm)
}

// releaseHeld sets a held restore (opened without auto-merge while fleetbot could not merge)
// to auto-merge now that it may, in place: auto-merge is enabled on the open pull request,
// pinned to the rollback commit its marker names (a head moved since is refused by the forge),
// and then its held mark is dropped from the body. Nothing is committed, closed or opened.
// Auto-merge goes first: should the body's update fail, the mark stays and the next run
// enables it again, never the other way round (a body saying "not held" on a pull request
// without auto-merge would be left so).
func releaseHeld(ctx context.Context, f Forge, r RestoreRequest, s *Snapshot, m marker) (Restored, error) {
	t := r.Target
	if wg := f.Capabilities().WriteGate; wg != nil {
		if err := wg.BeforeWrite(ctx, t.Owner, t.Repo, Cost{AutoMerge: 1, PRUpdates: 1}); err != nil {
			return Restored{}, fmt.Errorf("%s: %w", t.FullName(), err)
		}
	}
	done := Restored{Number: s.PR.Number, URL: s.PR.URL, Done: "auto-merge enabled"}
	merged, err := f.EnableAutoMerge(ctx, t.Owner, t.Repo, s.PR.Number, AutoMergeRequest{Head: r.Branch, Base: defaultBranch(t), HeadSHA: m.Head, Protection: protectionOf(t)})
	if err != nil {
		return done, fmt.Errorf("%s: enabling auto-merge on the held rollback PR #%d (head %s): %w", t.FullName(), s.PR.Number, report.ShortSHA(m.Head), err)
	}
	if merged {
		done.Done = "merged"
		return done, nil
	}
	m.Held = false
	if err := f.UpdatePR(ctx, t.Owner, t.Repo, s.PR.Number, RestoreTitle(t, r.To), restoreBody(r, m)); err != nil {
		return done, fmt.Errorf("%s: auto-merge enabled on the rollback PR #%d, but dropping its held mark failed (the next run tries again): %w", t.FullName(), s.PR.Number, err)
	}
	return done, nil
}

// restoreDone says, from the repo's snapshot, whether the restore needs no write (ok): its
// rollback pull request is open already, or the default branch holds the tree; or why it must
// not be written (a human's commit on the bot branch of an open pull request).
func restoreDone(s *Snapshot, r RestoreRequest) (Restored, bool, error) {
	t := r.Target
	if !s.Exists || s.Base == nil {
		return Restored{}, false, fmt.Errorf("%s: %w: the repo or its branch %s to roll back is gone", t.FullName(), ErrNotFound, defaultBranch(t))
	}
	if s.PR != nil && s.PR.State == StateClosed {
		if m, _ := parseMarker(s.PR.Body); m.Rollback == r.Failed && m.Failed == r.FailedTree {
			return Restored{Number: s.PR.Number, URL: s.PR.URL}, false, fmt.Errorf("%s: PR #%d: %w by a human: fleetbot neither reopens nor recreates it, and revision %s stays halted; "+
				"reopen and merge it to restore %s, or revert or fix the change in the control repo (a new rollout)",
				t.FullName(), s.PR.Number, ErrRestoreClosed, report.ShortSHA(r.Failed), report.ShortSHA(r.To))
		}
	}
	if s.PR != nil && s.PR.State == StateOpen {
		m, _ := parseMarker(s.PR.Body)
		if m.Rollback == r.Failed && m.Tree == r.Tree && s.Bot != nil && s.Bot.Tree == r.Tree {
			return Restored{Number: s.PR.Number, URL: s.PR.URL, Done: "already open"}, true, nil
		}
		if s.Bot != nil && !ours(s.Bot, m) {
			return Restored{Number: s.PR.Number, URL: s.PR.URL}, false, fmt.Errorf("%s: PR #%d: %w (commit %s on %s)", t.FullName(), s.PR.Number, ErrRestoreBlocked, report.ShortSHA(s.Bot.SHA), r.Branch)
		}
	}
	if s.Base.Tree == r.Tree {
		return Restored{Done: "already restored"}, true, nil
	}
	return Restored{}, false, nil
}

// writeRestorePR turns the open pull request of the bot branch into the rollback, or opens it.
func writeRestorePR(ctx context.Context, f Forge, r RestoreRequest, s *Snapshot, c Commit, m marker) (Restored, error) {
	t := r.Target
	title, body := RestoreTitle(t, r.To), restoreBody(r, m)
	if s.PR != nil && s.PR.State == StateOpen {
		if err := f.UpdatePR(ctx, t.Owner, t.Repo, s.PR.Number, title, body); err != nil {
			return Restored{}, fmt.Errorf("%s: turning PR #%d into the rollback: %w", t.FullName(), s.PR.Number, err)
		}
		return Restored{Number: s.PR.Number, URL: s.PR.URL, Done: "updated"}, nil
	}
	p, err := f.OpenPR(ctx, t.Owner, t.Repo, NewPR{Head: r.Branch, Base: defaultBranch(t), Title: title, Body: body, Labels: r.Labels,
		AutoMerge: r.AutoMerge, HeadSHA: c.SHA, Protection: protectionOf(t)})
	if err != nil {
		return Restored{}, fmt.Errorf("%s: opening the rollback pull request: %w", t.FullName(), err)
	}
	return Restored{Number: p.Number, URL: p.URL, Done: "opened"}, nil
}

// protectionOf is the protection fleetbot wants on a target's default branch.
func protectionOf(t *fanout.Target) *policy.Protection { return t.Access.Protection }

// RestoreTitle is the title of a rollback pull request restoring revision to.
func RestoreTitle(t *fanout.Target, to string) string {
	return fmt.Sprintf("fleetbot: roll back %s %s to %s", t.Kind, t.Name, report.ShortSHA(to))
}

// restoreMessage is the commit message of a rollback commit: the bot commit's trailers (so
// fleetbot knows the commit for its own) and the revision rolled back.
func restoreMessage(r RestoreRequest) string {
	return fmt.Sprintf("fleetbot: roll back %s to %s\n\n%s: %s\n%s: %s\n%s: %s\n", report.ShortSHA(r.Failed), report.ShortSHA(r.To),
		TrailerSource, r.To, TrailerTree, r.Tree, TrailerRollback, r.Failed)
}

// restoreBody is the description of a rollback pull request.
func restoreBody(r RestoreRequest, m marker) string {
	var b strings.Builder
	t := r.Target
	fmt.Fprintf(&b, "Rollback of %s **%s**: the control repo's revision `%s` failed its rollout", t.Kind, t.Name, r.Failed)
	if r.Why != "" {
		fmt.Fprintf(&b, " (%s)", r.Why)
	}
	fmt.Fprintf(&b, ".\n\nThis restores the content the repo had at the last revision that was healthy here, `%s` (tree `%s`).\n\n", r.To, r.Tree)
	b.WriteString("fleetbot does not propose the failed content here again until a control-repo change renders something else for this repo. " +
		"Merging this is gated on Flux's health like any change.\n\n")
	b.WriteString(m.String())
	b.WriteString("\n")
	return b.String()
}
