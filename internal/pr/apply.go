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
	o = o.withDefaults()
	s, err := f.Snapshot(ctx, t.Owner, t.Repo, defaultBranch(t), o.Branch)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.FullName(), err)
	}
	d, err := Decide(s, t, o)
	if err != nil {
		return nil, err
	}
	if s.Base != nil {
		d.baseTree = s.Base.Tree
	}
	if d.PushBranch || d.OpenPR || d.UpdatePR {
		old := map[string][]byte{}
		for _, fc := range d.Files {
			if fc.Op == FileAdded || !manifest.IsManifestPath(fc.Path) {
				continue
			}
			b, err := f.Blob(ctx, t.Owner, t.Repo, fc.OldHash)
			if err != nil {
				return nil, fmt.Errorf("reading %s of %s: %w", fc.Path, t.FullName(), err)
			}
			old[fc.Path] = b
		}
		d.Objects = DiffObjects(d.Files, old, desiredContent(t))
	}
	return d, nil
}

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
	owner, repo := t.Owner, t.Repo
	wrap := func(step string, err error) error {
		return fmt.Errorf("%s: %s: %w", t.FullName(), step, err)
	}
	if d.CreateRepo {
		err := f.CreateRepo(ctx, RepoSpec{
			Owner: owner, Repo: repo, Kind: t.Kind, Name: t.Name,
			DefaultBranch: d.defBr, Visibility: t.Visibility, Access: t.Access,
		})
		if err != nil {
			return nil, wrap("creating repo", err)
		}
	}
	base := Commit{SHA: d.Base, Tree: d.baseTree}
	if len(d.Bootstrap) > 0 {
		c, err := f.Commit(ctx, owner, repo, NewCommit{
			Changes: d.Bootstrap,
			Message: fmt.Sprintf("fleetbot: bootstrap %s %s\n\nREADME, CODEOWNERS and scaffolds; managed content arrives through the first pull request.\n", t.Kind, t.Name),
		})
		if err != nil {
			return nil, wrap("bootstrap commit", err)
		}
		if err := f.SetBranch(ctx, owner, repo, d.defBr, c.SHA, false); err != nil {
			return nil, wrap("creating branch "+d.defBr, err)
		}
		base = c
	}
	// A merge done by hand is recorded first: the PR that opens below
	// replaces d.PR, and a forge may refuse a second open PR from the bot
	// branch while the merged one still reads open.
	if d.RecordMerged {
		if mr := f.Capabilities().MergeRecorder; mr != nil {
			if err := mr.RecordMerged(ctx, owner, repo, d.PR.Number); err != nil {
				return nil, wrap(fmt.Sprintf("recording PR #%d merged", d.PR.Number), err)
			}
		}
	}
	head := ""
	if d.bot != nil {
		head = d.bot.SHA
	}
	if d.PushBranch {
		c, err := f.Commit(ctx, owner, repo, NewCommit{
			Parent: base.SHA, BaseTree: base.Tree, Changes: d.Changes, Message: CommitMessage(t, o.Source, d.Tree),
		})
		if err != nil {
			return nil, wrap("commit", err)
		}
		if c.Tree != d.Tree {
			return nil, wrap("commit", fmt.Errorf("forge wrote tree %s, expected %s", c.Tree, d.Tree))
		}
		if err := f.SetBranch(ctx, owner, repo, o.Branch, c.SHA, true); err != nil {
			return nil, wrap("pushing branch "+o.Branch, err)
		}
		head = c.SHA
	}
	m := marker{Head: head, Base: base.SHA, Tree: d.Tree, Source: o.Source, Waves: o.Waves}
	switch {
	case d.OpenPR:
		p, err := f.OpenPR(ctx, owner, repo, NewPR{
			Head: o.Branch, Base: d.defBr, Title: Title(t), Body: body(d, t, o.Source, m), Labels: o.Labels,
			AutoMerge: o.AutoMerge, HeadSHA: head, Protection: t.Access.Protection,
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
		if err := f.UpdatePR(ctx, owner, repo, d.PR.Number, Title(t), body(d, t, o.Source, m)); err != nil {
			return nil, wrap(fmt.Sprintf("updating PR #%d", d.PR.Number), err)
		}
	}
	if d.Block {
		msg := fmt.Sprintf("fleetbot found commit %s on `%s` that it did not make, so it stops updating this pull request and will never overwrite that commit.\n\n"+
			"Merge or close this pull request to let fleetbot propose changes again.", report.ShortSHA(d.bot.SHA), o.Branch)
		if err := f.Comment(ctx, owner, repo, d.PR.Number, msg); err != nil {
			return nil, wrap(fmt.Sprintf("commenting on PR #%d", d.PR.Number), err)
		}
		bm := d.marker
		bm.Blocked = true
		if err := f.UpdatePR(ctx, owner, repo, d.PR.Number, d.PR.Title, withMarker(d.PR.Body, bm)); err != nil {
			return nil, wrap(fmt.Sprintf("marking PR #%d blocked", d.PR.Number), err)
		}
	}
	if d.ClosePR {
		msg := fmt.Sprintf("`%s` already matches what the control repo asks for (tree `%s`), so this pull request is no longer needed: fleetbot closes it", d.defBr, report.ShortSHA(d.Tree))
		if d.DeleteBranch {
			msg += " and deletes `" + o.Branch + "`"
		}
		if err := f.ClosePR(ctx, owner, repo, d.PR.Number, msg+"."); err != nil {
			return nil, wrap(fmt.Sprintf("closing PR #%d", d.PR.Number), err)
		}
	}
	if d.DeleteBranch {
		if err := f.DeleteBranch(ctx, owner, repo, o.Branch); err != nil {
			return nil, wrap("deleting branch "+o.Branch, err)
		}
	}
	return d.PR, nil
}
