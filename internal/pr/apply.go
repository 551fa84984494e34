package pr

import (
	"context"
	"fmt"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/manifest"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Plan reads one snapshot of the target repo and decides what to do. It
// never writes. When a PR is to be written it also diffs the Kubernetes
// objects, reading the old content of changed manifests only.
func Plan(ctx context.Context, f Forge, t *fanout.Target, o Options) (*Decision, error) {
	s, err := ReadSnapshot(ctx, f, t, o)
	if err != nil {
		return nil, err
	}
	d, err := Decide(s, t, o)
	if err != nil {
		return nil, err
	}
	if err := Describe(ctx, f, t, d); err != nil {
		return nil, err
	}
	return d, nil
}

// ReadSnapshot reads, in one go, what Decide needs of the target repo (Forge.Snapshot): the
// observation a plan starts from.
func ReadSnapshot(ctx context.Context, f Forge, t *fanout.Target, o Options) (*Snapshot, error) {
	o = o.withDefaults()
	s, err := f.Snapshot(ctx, t.Owner, t.Repo, defaultBranch(t), o.Branch)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.FullName(), err)
	}
	return s, nil
}

// Describe fills, for a decision that writes a pull request, the Kubernetes objects its files
// add, change and remove (Decision.Objects): the one part of a plan that reads more than the
// snapshot, the old content of the changed manifests, and only for a repo that changes.
func Describe(ctx context.Context, f Forge, t *fanout.Target, d *Decision) error {
	if !d.PushBranch && !d.OpenPR && !d.UpdatePR {
		return nil
	}
	old := map[string][]byte{}
	for _, fc := range d.Files {
		if fc.Op == FileAdded || !manifest.IsManifestPath(fc.Path) {
			continue
		}
		b, err := f.Blob(ctx, t.Owner, t.Repo, fc.OldHash)
		if err != nil {
			return fmt.Errorf("reading %s of %s: %w", fc.Path, t.FullName(), err)
		}
		old[fc.Path] = b
	}
	d.Objects = DiffObjects(d.Files, old, desiredContent(t))
	return nil
}

// desiredContent is every file the target renders, scaffolds included, by path: the new side
// of the object diff.
func desiredContent(t *fanout.Target) map[string][]byte {
	m := make(map[string][]byte, len(t.Files)+len(t.Scaffolds))
	for p, c := range t.Scaffolds {
		m[p] = c
	}
	for p, c := range t.Files {
		m[p] = c
	}
	return m
}

// Apply executes a decision made by Plan (or Decide) for t: at most one
// bootstrap commit on a new repo, one bot commit, one branch move and one
// PR write in the common case. It returns the PR acted upon, if any.
func Apply(ctx context.Context, f Forge, t *fanout.Target, d *Decision, o Options) (*PullRequest, error) {
	o = o.withDefaults()
	wrap := func(step string, err error) error {
		return fmt.Errorf("%s: %s: %w", t.FullName(), step, err)
	}
	// A forge that moves several branches in one write creates the bootstrap's default branch
	// together with the bot branch (pushBranch), rather than on its own.
	joint := f.Capabilities().Branches != nil && d.PushBranch
	base, err := createAndBootstrap(ctx, f, t, d, joint, wrap)
	if err != nil {
		return nil, err
	}
	var pending *BranchMove
	if joint && len(d.Bootstrap) > 0 {
		pending = &BranchMove{Branch: d.defBr, SHA: base.SHA}
	}
	// A merge done by hand is recorded first: the PR that opens below
	// replaces d.PR, and a forge may refuse a second open PR from the bot
	// branch while the merged one still reads open.
	if mr := f.Capabilities().MergeRecorder; d.RecordMerged && mr != nil {
		if err := mr.RecordMerged(ctx, t.Owner, t.Repo, d.PR.Number); err != nil {
			return nil, wrap(fmt.Sprintf("recording PR #%d merged", d.PR.Number), err)
		}
	}
	head, err := pushBranch(ctx, f, t, d, o, base, pending, wrap)
	if err != nil {
		return nil, err
	}
	m := marker{Head: head, Base: base.SHA, Tree: d.Tree, Source: o.Source, Waves: o.Waves}
	if p, err := writePR(ctx, f, t, d, o, m, wrap); err != nil {
		return p, err
	}
	if err := blockPR(ctx, f, t, d, o, wrap); err != nil {
		return nil, err
	}
	if err := closePR(ctx, f, t, d, o, wrap); err != nil {
		return nil, err
	}
	return d.PR, nil
}

// stepError wraps a failed step of Apply with the repo and the step.
type stepError func(step string, err error) error

// createAndBootstrap creates a repo that does not exist and writes the root commit of the
// default branch of a new or empty one (README, CODEOWNERS, scaffolds), which the branch
// fleetbot pushes then builds on; it returns the commit the bot commit goes on top of. With
// defer set it writes the commit but leaves the branch to the caller (Capabilities.Branches).
func createAndBootstrap(ctx context.Context, f Forge, t *fanout.Target, d *Decision, deferBranch bool, wrap stepError) (Commit, error) {
	owner, repo := t.Owner, t.Repo
	if d.CreateRepo {
		err := f.CreateRepo(ctx, RepoSpec{
			Owner: owner, Repo: repo, Kind: t.Kind, Name: t.Name,
			DefaultBranch: d.defBr, Visibility: t.Visibility, Access: t.Access,
		})
		if err != nil {
			return Commit{}, wrap("creating repo", err)
		}
	}
	base := Commit{SHA: d.Base, Tree: d.baseTree}
	if len(d.Bootstrap) == 0 {
		return base, nil
	}
	c, err := f.Commit(ctx, owner, repo, NewCommit{
		Changes: d.Bootstrap,
		Message: fmt.Sprintf("fleetbot: bootstrap %s %s\n\nREADME, CODEOWNERS and scaffolds; managed content arrives through the first pull request.\n", t.Kind, t.Name),
	})
	if err != nil {
		return Commit{}, wrap("bootstrap commit", err)
	}
	if deferBranch {
		return c, nil
	}
	// The default branch of a new or empty repo: it must not exist yet.
	if err := f.SetBranch(ctx, owner, repo, d.defBr, c.SHA, ""); err != nil {
		return Commit{}, wrap("creating branch "+d.defBr, err)
	}
	return c, nil
}

// pushBranch writes the bot commit on base and moves the bot branch to it when the decision
// says so, from the head the snapshot showed (none: the branch must not exist), and returns
// the branch's head: the commit the pull request carries, and the one its marker records as
// fleetbot's own. A branch someone moved since the snapshot is never overwritten: the forge
// refuses the move with ErrRefMoved. A pending move (a new repo's default branch, at base) goes
// with the bot branch's in one SetBranches.
func pushBranch(ctx context.Context, f Forge, t *fanout.Target, d *Decision, o Options, base Commit, pending *BranchMove, wrap stepError) (string, error) {
	head := d.botHead()
	if !d.PushBranch {
		return head, nil
	}
	c, err := f.Commit(ctx, t.Owner, t.Repo, NewCommit{
		Parent: base.SHA, BaseTree: base.Tree, Changes: d.Changes, Message: CommitMessage(t, o.Source, d.Tree),
	})
	if err != nil {
		return "", wrap("commit", err)
	}
	if c.Tree != d.Tree {
		return "", wrap("commit", fmt.Errorf("forge wrote tree %s, expected %s", c.Tree, d.Tree))
	}
	if pending != nil {
		moves := []BranchMove{*pending, {Branch: o.Branch, SHA: c.SHA, Expect: head}}
		if err := f.Capabilities().Branches.SetBranches(ctx, t.Owner, t.Repo, moves); err != nil {
			return "", wrap("creating branches "+pending.Branch+" and "+o.Branch, err)
		}
		return c.SHA, nil
	}
	if err := f.SetBranch(ctx, t.Owner, t.Repo, o.Branch, c.SHA, head); err != nil {
		return "", wrap("pushing branch "+o.Branch, err)
	}
	return c.SHA, nil
}

// writePR opens the pull request or rewrites the open one's title and body (with the marker
// m), as the decision says. An opened pull request replaces d.PR, and is returned with the
// error when the forge opened it but failed after (auto-merge refused).
func writePR(ctx context.Context, f Forge, t *fanout.Target, d *Decision, o Options, m marker, wrap stepError) (*PullRequest, error) {
	switch {
	case d.OpenPR:
		p, err := f.OpenPR(ctx, t.Owner, t.Repo, NewPR{
			Head: o.Branch, Base: d.defBr, Title: Title(t), Body: body(d, t, o.Source, m), Labels: o.Labels,
			AutoMerge: o.AutoMerge, HeadSHA: m.Head, Protection: t.Access.Protection,
		})
		if p != nil {
			d.PR = p
		}
		if err != nil {
			// The pull request may be open (auto-merge refused): report it with the error.
			return p, wrap("opening PR", err)
		}
		d.PR = p
	case d.UpdatePR:
		if err := f.UpdatePR(ctx, t.Owner, t.Repo, d.PR.Number, Title(t), body(d, t, o.Source, m)); err != nil {
			return nil, wrap(fmt.Sprintf("updating PR #%d", d.PR.Number), err)
		}
	}
	return d.PR, nil
}

// blockPR says once, on a pull request whose branch carries a commit fleetbot did not make,
// that fleetbot stops updating it, and records that in its marker so later runs leave it.
func blockPR(ctx context.Context, f Forge, t *fanout.Target, d *Decision, o Options, wrap stepError) error {
	if !d.Block {
		return nil
	}
	msg := fmt.Sprintf("fleetbot found commit %s on `%s` that it did not make, so it stops updating this pull request and will never overwrite that commit.\n\n"+
		"Merge or close this pull request to let fleetbot propose changes again.", report.ShortSHA(d.bot.SHA), o.Branch)
	if err := f.Comment(ctx, t.Owner, t.Repo, d.PR.Number, msg); err != nil {
		return wrap(fmt.Sprintf("commenting on PR #%d", d.PR.Number), err)
	}
	bm := d.marker
	bm.Blocked = true
	if err := f.UpdatePR(ctx, t.Owner, t.Repo, d.PR.Number, d.PR.Title, withMarker(d.PR.Body, bm)); err != nil {
		return wrap(fmt.Sprintf("marking PR #%d blocked", d.PR.Number), err)
	}
	return nil
}

// closePR closes, with a comment saying why, a pull request the default branch no longer
// needs, and deletes the bot branch when the decision says so (never while its pull request
// is open).
func closePR(ctx context.Context, f Forge, t *fanout.Target, d *Decision, o Options, wrap stepError) error {
	if d.ClosePR {
		msg := fmt.Sprintf("`%s` already matches what the control repo asks for (tree `%s`), so this pull request is no longer needed: fleetbot closes it", d.defBr, report.ShortSHA(d.Tree))
		if d.DeleteBranch {
			msg += " and deletes `" + o.Branch + "`"
		}
		if err := f.ClosePR(ctx, t.Owner, t.Repo, d.PR.Number, msg+"."); err != nil {
			return wrap(fmt.Sprintf("closing PR #%d", d.PR.Number), err)
		}
	}
	if d.DeleteBranch {
		if err := f.DeleteBranch(ctx, t.Owner, t.Repo, o.Branch, d.botHead()); err != nil {
			return wrap("deleting branch "+o.Branch, err)
		}
	}
	return nil
}

// botHead is the bot branch's head in the snapshot the decision was made on ("" when it had
// none): the head every move of the branch names as the one it replaces.
func (d *Decision) botHead() string {
	if d.bot == nil {
		return ""
	}
	return d.bot.SHA
}
