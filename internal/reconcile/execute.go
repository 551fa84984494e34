package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// execute carries out a plan the guard let through, repo by repo, at most opts.Concurrency at
// a time: each repo's content and access as decided, only the access of a repo the rollout
// holds, nothing on an archived repo. A failing repo does not stop the others; its result says
// why, with its class. Writes outlive a cancelled context once started (a repo is never left
// half-written by a shutdown); repos not started by then fail as not applied.
func execute(ctx context.Context, f Forge, in runInput, pl *planned) {
	env := &decideEnv{repo: in.repo, prOpts: prOptions(in.repo, in.opts)}
	var mu, writes sync.Mutex
	steps := newStepper(in.opts.Step, PhaseApply, len(pl.repos))
	each(context.WithoutCancel(ctx), len(pl.repos), in.opts.Concurrency, func(i int) {
		p := pl.repos[i]
		log := in.opts.Logger.With("repo", p.target().FullName())
		held := pl.verdict.held[p.target().Repo]
		if held != nil {
			// Held by the rollout: converge access only; report it deferred.
			p.res.Err, p.content = nil, withoutContent(p.content)
		}
		if p.res.Err == nil && !p.archived() {
			o := pl.verdict.prOptions(env, p.target())
			if err := ctx.Err(); err != nil {
				p.res.fail(fmt.Errorf("%s: not applied: %w", p.target().FullName(), context.Cause(ctx)))
			} else if err := recovered(func() { executeRepo(ctx, f, p, o, log, &writes) }); err != nil {
				p.res.fail(fmt.Errorf("%s: %w", p.target().FullName(), err))
			}
		}
		if held != nil && p.res.Err == nil {
			p.res.Err = held
		}
		logResult(log, p.res)
		if in.opts.Progress != nil {
			mu.Lock()
			in.opts.Progress(p.res)
			mu.Unlock()
		}
		steps.step()
	})
}

// logResult logs how a repo ended, at the level its class deserves.
func logResult(log *slog.Logger, res Result) {
	switch {
	case res.Deferred():
		log.Warn("reconcile deferred to the next run", "err", res.Err, "class", res.Outcome().Class, "reason", res.Outcome().Reason)
	case res.Err != nil:
		log.Error("reconcile failed", "err", res.Err, "class", res.Outcome().Class, "reason", res.Outcome().Reason)
	default:
		log.Info("reconciled", "action", res.Action, "pr", res.PR)
	}
}

// executeRepo executes one repo's decisions. writes is shared by the run's workers: a forge
// with a write budget gets one repo's writes at a time.
//
// Access (branch protection first) converges before a pull request is opened or updated on a
// repo whose default branch exists: a pull request fleetbot opens while someone has removed
// the protection would be mergeable without review, and merge: auto would merge it. A new or
// empty repo keeps the bootstrap order instead (CODEOWNERS, then protection, then the teams:
// see pr.Apply and the forge's CreateRepo), so its access converges after.
func executeRepo(ctx context.Context, f Forge, p *repoPlan, o pr.Options, log *slog.Logger, writes *sync.Mutex) {
	accessDone, accessErr := false, error(nil)
	if p.content.Writes() && !isAccessEntry(p) {
		if f.Capabilities().WriteGate != nil {
			// A forge with a write budget gets one repo's writes at a time: its mutations are
			// serial anyway, and the repo the gate admits then finds the budget as the gate
			// saw it, instead of other repos exhausting the windows half-way (a tree and a
			// commit written, the ref refused: content writes wasted and redone).
			writes.Lock()
			defer writes.Unlock()
		}
		d, err := admitWrites(ctx, f, p, o)
		if err != nil {
			p.res.fail(err)
			return
		}
		if d.Writes() {
			if existing(d) && (d.OpenPR || d.UpdatePR || d.PushBranch) {
				accessDone, accessErr = true, convergeAccess(ctx, f, p, d, log)
			}
			if err := writeContent(ctx, f, p, d, o); err != nil {
				p.res.fail(errors.Join(err, accessErr))
				return
			}
		}
	}
	if !accessDone {
		accessErr = convergeAccess(ctx, f, p, p.content, log)
	}
	if accessErr != nil {
		p.res.fail(accessErr)
	}
}

// existing reports whether a decision is about a repo whose default branch exists (neither
// created nor bootstrapped by it).
func existing(d *pr.Decision) bool { return !d.CreateRepo && len(d.Bootstrap) == 0 }

// convergeAccess applies the repo's access plan, notes a protection the forge could not apply,
// and logs the steps. A repo the decision d creates got its access with the repo.
func convergeAccess(ctx context.Context, f Forge, p *repoPlan, d *pr.Decision, log *slog.Logger) error {
	if p.access == nil || p.access.plan.Empty() || d.CreateRepo {
		return nil
	}
	err := applyAccess(ctx, f, p)
	noteProtection(f, p)
	if err == nil {
		log.Info("access converged", "steps", p.access.plan.Describe())
	}
	return err
}

// writeContent executes the pull-request decision d and records what it did: the pull request,
// whether merge: auto merged it at once, a protection the forge could not apply, and the
// CODEOWNERS of a repo whose bootstrap commit just landed it (checked now, while the repo is
// new).
//
// A write that lost a race (pr.ErrRefMoved: someone moved a branch after the snapshot, and the
// forge, naming the head it read, wrote nothing over it) plans the repo once more from a fresh
// snapshot and executes that decision instead, in the same run: a commit a person pushed to the
// bot branch then blocks the pull request at once, and a branch another writer moved is built
// on where it is. A second lost race is the repo's result: retryable, reason RefMoved.
func writeContent(ctx context.Context, f Forge, p *repoPlan, d *pr.Decision, o pr.Options) error {
	pull, err := pr.Apply(ctx, f, p.target(), d, o)
	if errors.Is(err, pr.ErrRefMoved) {
		p.res.setPR(pull)
		if d, err = replan(ctx, f, p, o); err != nil {
			return fmt.Errorf("planning %s again after a lost race: %w", p.target().FullName(), err)
		}
		pull, err = d.PR, nil
		if d.Writes() {
			pull, err = pr.Apply(ctx, f, p.target(), d, o)
		}
	}
	p.res.setPR(pull)
	if err != nil {
		return err
	}
	if d.OpenPR && pull != nil && pull.State == pr.StateMerged {
		p.res.Merged = true
	}
	noteProtection(f, p)
	if !existing(d) {
		checkCodeowners(ctx, f, p, p.target().Access, true)
	}
	return nil
}

// admitWrites asks a WriteGate forge whether the repo's decision may be executed now,
// planning the repo once more when the forge reports its snapshot stale (a pull request closed
// by hand since): the decision executed is then the new one. A forge whose write budget cannot
// afford the repo defers it (an error of class deferred, until the budget's next slot).
func admitWrites(ctx context.Context, f Forge, p *repoPlan, o pr.Options) (*pr.Decision, error) {
	g := f.Capabilities().WriteGate
	if g == nil {
		return p.content, nil
	}
	t := p.target()
	err := g.BeforeWrite(ctx, t.Owner, t.Repo, p.content.Cost())
	if !errors.Is(err, pr.ErrStale) {
		return p.content, err
	}
	return replan(ctx, f, p, o)
}

// replan plans the repo again from a fresh snapshot, which becomes the repo's decision and
// result, and asks a WriteGate forge to admit its writes.
func replan(ctx context.Context, f Forge, p *repoPlan, o pr.Options) (*pr.Decision, error) {
	t := p.target()
	d, err := pr.Plan(ctx, f, t, o)
	if err != nil {
		return nil, err
	}
	p.content = d
	p.res.fromDecision(d)
	g := f.Capabilities().WriteGate
	if !d.Writes() || g == nil {
		return d, nil
	}
	return d, g.BeforeWrite(ctx, t.Owner, t.Repo, d.Cost())
}
