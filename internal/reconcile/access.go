package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// KindControl is the kind of the control repo's result: fleetbot guards its
// access (spec.repos.control) and never writes its content.
const KindControl fanout.Kind = "control"

// SkippedArchived is Result.Skipped for an archived repo: GitHub refuses
// every write to it, so fleetbot leaves it alone and says so.
const SkippedArchived = "archived"

// ErrTooManyAccessRemovals refuses a run that would take away more than
// platform spec.access.maxAccessRemovals of one repo's grants, unless
// AllowAccessRemovals is set: a sudden mass revocation is more likely a
// broken control repo or a renamed team than an intent.
var ErrTooManyAccessRemovals = policy.ErrTooManyRemovals

// CodeownersChecker checks the CODEOWNERS on a repo's default branch; see
// pr.CodeownersChecker.
type CodeownersChecker = pr.CodeownersChecker

// AccessReport is a repo's access drift and what apply does about it.
type AccessReport struct {
	// Steps are the plan's steps in words, one each ("grant team x push"):
	// what apply does.
	Steps []string
	// Notes are what apply leaves as it is and why (additive mode, protected
	// names, removals allowed by --allow-access-removals) and a CODEOWNERS
	// edited on the default branch, which the PR corrects.
	Notes []string
	// Drift is Steps then Notes: how the repo drifted, one line each.
	Drift []string
	// Refused is why the plan's removals exceed maxAccessRemovals.
	Refused string
	// Applied is true once apply converged the access.
	Applied bool
}

// accessOptions are the policy.Diff options of a run: additive mode, the
// names never removed (platform admin teams and fleetbot itself) and the
// removal cap.
func accessOptions(fl control.Fleet, org policy.Org) policy.DiffOptions {
	protected := append(append([]string(nil), fl.Admins...), org.Self...)
	return policy.DiffOptions{
		Additive:    fl.AccessMode == control.AccessAdditive,
		Protected:   protected,
		MaxRemovals: &fl.MaxAccessRemovals,
		BaseRole:    org.BaseRole,
	}
}

// accessReport says a repo's access drift in words for its result: the steps apply takes,
// what it withholds and why, a refusal by maxAccessRemovals (or that --allow-access-removals
// lifted it), and a CODEOWNERS on the default branch that the pull request rewrites. It is nil
// when there is nothing to say.
func accessReport(t *fanout.Target, p policy.Plan, d *pr.Decision, allowRemovals bool) *AccessReport {
	// The steps are what apply does; what it withholds is a note (policy.Plan.Describe says
	// both, withheld last, in one list).
	steps := p
	steps.Withheld = nil
	rep := &AccessReport{Steps: steps.Describe()}
	for _, w := range p.Withheld {
		rep.Notes = append(rep.Notes, "kept: "+w)
	}
	switch {
	case p.Refused != nil && allowRemovals:
		rep.Notes = append(rep.Notes, "kept going: "+p.Refused.Error()+", allowed by --allow-access-removals")
	case p.Refused != nil:
		rep.Refused = p.Refused.Error()
	}
	if d != nil {
		for _, fc := range d.Files {
			if fc.Path == fanout.CodeownersPath && fc.Op != pr.FileAdded {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s differs from the persona matrix (%s): the PR rewrites it",
					fanout.CodeownersPath, t.DefaultBranch, fc.Op))
			}
		}
	}
	rep.Drift = append(slices.Clip(rep.Steps), rep.Notes...)
	if len(rep.Drift) == 0 && rep.Refused == "" {
		return nil
	}
	return rep
}

// codeownersBlob is the hash of the CODEOWNERS file on the default branch
// as the decision saw it, or "" when there is none. Once a new repo's
// bootstrap commit landed, it is the desired CODEOWNERS.
func codeownersBlob(t *fanout.Target, d *pr.Decision, landed bool) string {
	if landed && (d.CreateRepo || len(d.Bootstrap) > 0) {
		if data, ok := t.Files[fanout.CodeownersPath]; ok {
			return gittree.BlobHash(data)
		}
		return ""
	}
	for _, fc := range d.Files {
		if fc.Path != fanout.CodeownersPath {
			continue
		}
		if fc.Op == pr.FileAdded {
			return ""
		}
		return fc.OldHash
	}
	if d.CreateRepo || len(d.Bootstrap) > 0 {
		return ""
	}
	if data, ok := t.Files[fanout.CodeownersPath]; ok {
		return gittree.BlobHash(data)
	}
	return ""
}

// checkCodeowners asks a CodeownersChecker forge about the CODEOWNERS on the default branch of
// a repo with content, given the repo's access; landed says the decision's bootstrap commit was
// written.
func checkCodeowners(ctx context.Context, f Forge, p *repoPlan, access policy.Access, landed bool) {
	c := f.Capabilities().Codeowners
	if c == nil || p.content == nil || isAccessEntry(p) {
		return
	}
	t := p.target()
	blob := codeownersBlob(t, p.content, landed)
	if blob == "" {
		p.res.CodeownersErrors = nil
		return
	}
	errs, err := c.CodeownersErrors(ctx, t.Owner, t.Repo, blob, access)
	if err != nil {
		p.res.CodeownersErrors = []policy.CodeownersError{{Path: fanout.CodeownersPath, Kind: "Unchecked", Message: err.Error()}}
		return
	}
	p.res.CodeownersErrors = errs
}

// applyAccess converges a repo's access by its plan, then re-checks its CODEOWNERS against the
// new access (a team that just got write access is no longer an unknown owner).
func applyAccess(ctx context.Context, f Forge, p *repoPlan) error {
	if p.access == nil || p.access.plan.Empty() {
		return nil
	}
	t := p.target()
	ap := p.access.plan
	// Reaching here with a refused plan means the run was allowed to
	// exceed maxAccessRemovals: the refusal is lifted.
	ap.Refused = nil
	if err := f.ApplyAccess(ctx, t.Owner, t.Repo, ap); err != nil {
		return fmt.Errorf("%s: converging access: %w", t.FullName(), err)
	}
	if p.res.Access != nil {
		p.res.Access.Applied = true
	}
	if (policy.Teams{}).Changes(&ap) {
		checkCodeowners(ctx, f, p, policy.Converge(p.access.observed, ap), false)
	}
	return nil
}

// ProtectionReporter reports a default branch that could not be protected;
// see pr.ProtectionReporter.
type ProtectionReporter = pr.ProtectionReporter

// noteProtection adds the warning of a repo whose protection the forge could not apply.
func noteProtection(f Forge, p *repoPlan) {
	pu, t := f.Capabilities().Protection, p.target()
	if pu == nil || t.Access.Protection == nil {
		return
	}
	if reason := pu.ProtectionUnavailable(t.Owner, t.Repo); reason != "" {
		p.res.warn(protectionWarning(t, reason))
	}
}

// protectionWarning says which repo is not protected, what that leaves unenforced and what to
// do about it.
func protectionWarning(t *fanout.Target, reason string) string {
	// The repo is not named: the warning sits on its repo's entry, and the same text on every
	// repo of a free organization folds into one line of the report.
	return fmt.Sprintf("branch protection of %s is not enforced (GitHub: %q): pull requests, code-owner review, "+
		"dismissal of stale reviews and the ban on force pushes and deletion are not required; every other managed "+
		"setting is applied. To enforce it, make the repository public (visibility in platform.yaml) or move the "+
		"organization %s to a paid GitHub plan (Team or Enterprise)",
		t.DefaultBranch, strings.TrimSpace(reason), t.Owner)
}
