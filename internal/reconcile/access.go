package reconcile

import (
	"context"
	"errors"
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
	}
}

// controlItem is the access-only item of the control repo, when the
// platform names it.
func controlItem(fl control.Fleet) *item {
	t := &fanout.Target{
		Kind: KindControl, Name: fl.ControlRepo, Owner: fl.Owner, Repo: fl.ControlRepo,
		DefaultBranch: fl.DefaultBranch, Access: policy.ControlRepoAccess(fl.Admins, fl.DefaultBranch),
	}
	it := newItem(t)
	it.accessOnly = true
	return it
}

// planAccess reads a repo's access and diffs it against the persona matrix;
// a CODEOWNERS that differs on the default branch is reported as drift too.
func planAccess(ctx context.Context, f Forge, it *item, opts policy.DiffOptions, allowRemovals bool) error {
	t := it.target
	observed, err := f.Access(ctx, t.Owner, t.Repo)
	if err != nil {
		return fmt.Errorf("%s: reading access: %w", t.FullName(), err)
	}
	p := policy.Diff(t.Access, observed, opts)
	it.observed, it.access = observed, &p
	if observed.ProtectionUnavailable != "" && t.Access.Protection != nil {
		it.res.warn(protectionWarning(t, observed.ProtectionUnavailable))
	}
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
	if it.decision != nil {
		for _, fc := range it.decision.Files {
			if fc.Path == fanout.CodeownersPath && fc.Op != pr.FileAdded {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s on %s differs from the persona matrix (%s): the PR rewrites it",
					fanout.CodeownersPath, t.DefaultBranch, fc.Op))
			}
		}
	}
	rep.Drift = append(slices.Clip(rep.Steps), rep.Notes...)
	if len(rep.Drift) > 0 || rep.Refused != "" {
		it.res.Access = rep
	}
	it.res.AccessChanged = !p.Empty()
	return nil
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

// checkCodeowners asks a CodeownersChecker forge about the CODEOWNERS on
// the default branch, given the repo's access; landed says the decision's
// bootstrap commit was written.
func checkCodeowners(ctx context.Context, f Forge, it *item, access policy.Access, landed bool) {
	c := f.Capabilities().Codeowners
	if c == nil || it.decision == nil || it.accessOnly {
		return
	}
	blob := codeownersBlob(it.target, it.decision, landed)
	if blob == "" {
		it.res.CodeownersErrors = nil
		return
	}
	errs, err := c.CodeownersErrors(ctx, it.target.Owner, it.target.Repo, blob, access)
	if err != nil {
		it.res.CodeownersErrors = []policy.CodeownersError{{Path: fanout.CodeownersPath, Kind: "Unchecked", Message: err.Error()}}
		return
	}
	it.res.CodeownersErrors = errs
}

// refuseAccess turns every repo whose access plan exceeds
// maxAccessRemovals into one refusal of the run, unless allowed.
func refuseAccess(items []*item, allow bool) error {
	if allow {
		return nil
	}
	var lines []string
	for _, it := range items {
		if it.access == nil || it.access.Refused == nil {
			continue
		}
		detail := it.access.Refused.Error()
		if re := (*policy.RemovalsError)(nil); errors.As(it.access.Refused, &re) {
			detail = re.Detail
		}
		lines = append(lines, it.target.FullName()+": "+detail)
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%w in %d repo(s): %s; nothing was written. If the control repo is right, re-run with --allow-access-removals",
		ErrTooManyAccessRemovals, len(lines), strings.Join(lines, "; "))
}

// applyAccess converges a repo's access by its plan, then re-checks its
// CODEOWNERS against the new access (a team that just got write access is
// no longer an unknown owner).
func applyAccess(ctx context.Context, f Forge, it *item) error {
	if it.access == nil || it.access.Empty() {
		return nil
	}
	t := it.target
	p := *it.access
	// Reaching here with a refused plan means the run was allowed to
	// exceed maxAccessRemovals: the refusal is lifted.
	p.Refused = nil
	if err := f.ApplyAccess(ctx, t.Owner, t.Repo, p); err != nil {
		return fmt.Errorf("%s: converging access: %w", t.FullName(), err)
	}
	if it.res.Access != nil {
		it.res.Access.Applied = true
	}
	if len(it.access.Grants)+len(it.access.Changes)+len(it.access.Revokes) > 0 {
		checkCodeowners(ctx, f, it, policy.Converge(it.observed, p), false)
	}
	return nil
}

// joinRefusals combines the target-removal and access-removal refusals.
func joinRefusals(errs ...error) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return errors.Join(out...)
}

// ProtectionReporter reports a default branch that could not be protected;
// see pr.ProtectionReporter.
type ProtectionReporter = pr.ProtectionReporter

// noteProtection adds the warning of a repo whose protection the forge could not apply.
func noteProtection(f Forge, it *item) {
	pu := f.Capabilities().Protection
	if pu == nil || it.target.Access.Protection == nil {
		return
	}
	if reason := pu.ProtectionUnavailable(it.target.Owner, it.target.Repo); reason != "" {
		it.res.warn(protectionWarning(it.target, reason))
	}
}

// protectionWarning says which repo is not protected, what that leaves unenforced and what to
// do about it.
func protectionWarning(t *fanout.Target, reason string) string {
	return fmt.Sprintf("branch protection of %s in %s is not enforced (GitHub: %q): pull requests, code-owner review, "+
		"dismissal of stale reviews and the ban on force pushes and deletion are not required; every other managed "+
		"setting is applied. To enforce it, make the repository public (visibility in platform.yaml) or move the "+
		"organization %s to a paid GitHub plan (Team or Enterprise)",
		t.DefaultBranch, t.FullName(), strings.TrimSpace(reason), t.Owner)
}
