package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultMaxAccessRemovals caps the share of a repo's observed grants one
// run may remove when DiffOptions.MaxRemovals is nil.
const DefaultMaxAccessRemovals = "25%"

// ErrTooManyRemovals marks a Plan whose removals exceed the configured cap:
// a sudden mass revocation is far more likely a broken control repo (or a
// team renamed) than an intent, so it needs a human to look first.
var ErrTooManyRemovals = errors.New("too many access removals")

// DiffOptions tunes how Diff converges observed access to the desired one.
type DiffOptions struct {
	// Additive only adds: missing grants and role upgrades are planned,
	// revokes, downgrades and collaborator removals are only reported.
	Additive bool
	// Protected are team slugs and logins that are never revoked nor
	// downgraded: the platform admin teams and fleetbot itself.
	Protected []string
	// MaxRemovals caps how many grants one run may remove or downgrade, as a
	// count or a percentage of the repo's observed grants (default 25%,
	// rounded up, at least 1).
	MaxRemovals *intstr.IntOrString
	// BaseRole is the org's base role (Org.BaseRole): a missing team whose desired role it
	// covers (CoveredByBase) is not granted, as its members hold that role already.
	BaseRole Role
}

// Grant is one team or collaborator with a role.
type Grant struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// Change is a role change of a team that has access already.
type Change struct {
	Name string `json:"name"`
	From Role   `json:"from"`
	To   Role   `json:"to"`
}

// Plan is what it takes to make a repo's observed access the desired one.
// Every list is sorted by name.
type Plan struct {
	// Grants are teams to add with a role.
	Grants []Grant `json:"grants,omitempty"`
	// Changes are role changes of teams already present.
	Changes []Change `json:"changes,omitempty"`
	// Revokes are teams to remove.
	Revokes []Grant `json:"revokes,omitempty"`
	// RemoveCollaborators are direct collaborators to remove: fleetbot's
	// matrix grants access through teams only.
	RemoveCollaborators []Grant `json:"removeCollaborators,omitempty"`
	// Protection is the protection to apply when the observed one is missing
	// or weaker; nil when there is no drift.
	Protection *Protection `json:"protection,omitempty"`
	// ProtectionDrift says, one entry per setting, how the observed
	// protection is weaker than the desired one.
	ProtectionDrift []string `json:"protectionDrift,omitempty"`
	// Ruleset is the ruleset to write (create when its ID is 0, else update) when the
	// observed one is missing or weaker; nil when there is no drift.
	Ruleset *Ruleset `json:"ruleset,omitempty"`
	// RulesetDrift says, one entry per setting, how the observed ruleset falls short.
	RulesetDrift []string `json:"rulesetDrift,omitempty"`
	// Properties are the custom property values to set.
	Properties map[string]string `json:"properties,omitempty"`
	// AllowAutoMerge turns on the repo's "Allow auto-merge" setting, which
	// the desired access needs and the observed one lacks. fleetbot never
	// turns it off: a repo that allows more than it needs is not drift.
	AllowAutoMerge bool `json:"allowAutoMerge,omitempty"`
	// Withheld is drift the options forbid correcting (additive mode,
	// protected names): reported, never applied.
	Withheld []string `json:"withheld,omitempty"`
	// Refused is non-nil (wrapping ErrTooManyRemovals) when the removals
	// exceed DiffOptions.MaxRemovals: apply must then skip Revokes,
	// downgrading Changes and RemoveCollaborators, and report the refusal.
	Refused error `json:"-"`
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool {
	for _, u := range Units {
		if u.Changes(p) {
			return false
		}
	}
	return true
}

// Removals counts the planned grants that take rights away: revokes,
// downgrades and collaborator removals.
func (p *Plan) Removals() int {
	n := len(p.Revokes) + len(p.RemoveCollaborators)
	for _, c := range p.Changes {
		if Rank(c.To) < Rank(c.From) {
			n++
		}
	}
	return n
}

// Diff compares the observed access of one repo with the desired one and
// plans the smallest set of changes that converges it, within the safety
// rules of DESIGN §4: protected names (the platform admin teams and the bot)
// are never revoked nor downgraded, additive mode never takes rights away,
// and a plan removing more than MaxRemovals of the observed grants is
// flagged as Refused rather than silently applied. It is a pure function of
// its inputs, so plan and apply agree and tests need no code host.
func Diff(desired, observed Access, opts DiffOptions) Plan {
	var p Plan
	for _, u := range Units {
		u.Diff(desired, observed, opts, &p)
	}
	total := len(observed.Teams) + len(observed.Collaborators)
	if allowed, err := maxRemovals(opts.MaxRemovals, total); err != nil {
		p.Refused = &RemovalsError{Detail: "invalid maxAccessRemovals: " + err.Error(), Err: err}
	} else if n := p.Removals(); n > allowed {
		p.Refused = &RemovalsError{Detail: fmt.Sprintf("%d of %d grants would be removed, the limit is %d (maxAccessRemovals)", n, total, allowed)}
	}
	return p
}

// RemovalsError is a Plan's refusal by maxAccessRemovals; it wraps ErrTooManyRemovals (and
// Err, why the limit could not be read, if that is the reason).
type RemovalsError struct {
	// Detail says how many grants would go and the limit, for a report that names the
	// repo and the refusal itself.
	Detail string
	Err    error
}

func (e *RemovalsError) Error() string { return ErrTooManyRemovals.Error() + ": " + e.Detail }

// Unwrap lets errors.Is find ErrTooManyRemovals and the cause.
func (e *RemovalsError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrTooManyRemovals}
	}
	return []error{ErrTooManyRemovals, e.Err}
}

// maxRemovals resolves the cap against total observed grants: a percentage
// rounds up and the cap is at least 1, so a single hand-granted extra can
// always be corrected.
func maxRemovals(limit *intstr.IntOrString, total int) (int, error) {
	if limit == nil {
		def := intstr.FromString(DefaultMaxAccessRemovals)
		limit = &def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(limit, total, true)
	if err != nil {
		return 0, fmt.Errorf("resolving %q: %w", limit.String(), err)
	}
	return int(math.Max(1, float64(n))), nil
}

// ProtectionDrift lists how observed is weaker than desired, one entry per setting; none when
// observed is at least desired.
func ProtectionDrift(desired Protection, observed *Protection) []string {
	return protectionDrift(desired, observed)
}

// protectionDrift lists how observed is weaker than desired. Stricter
// observed settings (more approvals) are not drift: fleetbot guarantees a
// floor, and platform admins may raise it by hand.
func protectionDrift(desired Protection, observed *Protection) []string {
	if observed == nil {
		return []string{fmt.Sprintf("branch %s is not protected", desired.Branch)}
	}
	var d []string
	if observed.Branch != desired.Branch {
		d = append(d, fmt.Sprintf("protection is on branch %q, not %q", observed.Branch, desired.Branch))
	}
	if desired.RequirePullRequest && !observed.RequirePullRequest {
		d = append(d, "pull requests are not required")
	}
	if desired.RequireCodeOwnerReviews && !observed.RequireCodeOwnerReviews {
		d = append(d, "code owner reviews are not required")
	}
	if desired.DismissStaleReviews && !observed.DismissStaleReviews {
		d = append(d, "stale reviews are not dismissed")
	}
	if observed.RequiredApprovals < desired.RequiredApprovals {
		d = append(d, fmt.Sprintf("%d approval(s) required, want at least %d", observed.RequiredApprovals, desired.RequiredApprovals))
	}
	if observed.AllowForcePushes && !desired.AllowForcePushes {
		d = append(d, "force pushes are allowed")
	}
	if observed.AllowDeletions && !desired.AllowDeletions {
		d = append(d, "branch deletion is allowed")
	}
	for _, c := range desired.RequiredChecks {
		o, ok := findCheck(observed.RequiredChecks, c.Context)
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("status check %s is not required", c))
		case c.AppID > 0 && o.AppID != c.AppID:
			d = append(d, fmt.Sprintf("status check %q is required %s, not only from GitHub App %d",
				c.Context, strings.TrimPrefix(o.String(), fmt.Sprintf("%q ", o.Context)), c.AppID))
		}
	}
	return d
}

// findCheck returns the check of checks with context.
func findCheck(checks []RequiredCheck, context string) (RequiredCheck, bool) {
	for _, c := range checks {
		if c.Context == context {
			return c, true
		}
	}
	return RequiredCheck{}, false
}

// mergeChecks returns want, plus the checks of have whose context want does not name, sorted
// by context: the checks fleetbot requires replace those of the same context, the others stay.
func mergeChecks(want, have []RequiredCheck) []RequiredCheck {
	out := slices.Clone(want)
	for _, c := range have {
		if _, ok := findCheck(want, c.Context); !ok {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b RequiredCheck) int { return strings.Compare(a.Context, b.Context) })
	return out
}

// WithCheck returns a copy of p that also requires c, in place of a check of the same context.
func (p Protection) WithCheck(c RequiredCheck) Protection {
	p.RequiredChecks = mergeChecks([]RequiredCheck{c}, p.RequiredChecks)
	return p
}
