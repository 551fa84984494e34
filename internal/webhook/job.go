package webhook

import (
	"strconv"
	"strings"
	"time"
)

// Kind is what a job does.
type Kind string

// Job kinds.
const (
	// KindApply reconciles every target repo from the control repo's default
	// branch: a push there, an installation change, or the periodic resync.
	KindApply Kind = "apply"
	// KindDrift reconciles one target repo that changed under fleetbot (a
	// merged or closed PR, a push, a settings, collaborator, team or branch
	// protection change).
	KindDrift Kind = "drift"
	// KindCheck plans a control-repo pull request and reports it as a check
	// run; it never writes to a target repo.
	KindCheck Kind = "check"
	// KindTenant checks a pull request of a workspace or cluster repo (check workspace, check
	// cluster on its head) and reports it as the tenant check run its protection requires.
	KindTenant Kind = "tenant"
)

// Job is queued work. Jobs with the same Key coalesce: the newest delivery's
// fields win, the first delivery's Queued time stays.
type Job struct {
	Kind Kind
	// Repo is "owner/name": the target repo of a drift or tenant job, the control repo of the
	// others.
	Repo string
	// SHA is the commit that triggered the job: the pushed head of an apply
	// (informational; apply reads the branch head when it runs) or the pull
	// request head a check reports on.
	SHA string
	// PR is the pull request of a check job (control repo) or a tenant job (workspace or
	// cluster repo); 0 when unknown, as for a check run rerequested on a commit.
	PR int
	// Base is the pull request's base commit and Author its author's login
	// (check jobs; either may be unknown), for "check control".
	Base, Author string
	// CheckRun is, for a check job a resync queued for a check run left in_progress by a
	// process that died (ReasonRecoverStuck), that run: the job completes it instead of starting
	// another. 0: the job starts its own.
	CheckRun int64
	// Reason says what caused the job: "push", "resync", "pull_request.closed"...
	Reason string
	// Access says the event may have changed the target repo's access settings (teams,
	// collaborators, branch protection, repo settings: the repository, member, team and
	// branch_protection_rule events), so a drift reads them afresh. A drift for a content event
	// (a push, a merged pull request) trusts the access it last observed, as an apply does
	// (for up to an hour): those events cannot change it.
	Access bool
	// Incremental lets an apply plan only the target repos whose desired state changed since
	// the last converged render (a push to the control repo); a job coalesced with a full one
	// (a resync, an installation change) is full.
	Incremental bool
	// Delivery is the X-GitHub-Delivery of the newest delivery merged in
	// ("" for a resync).
	Delivery string
	// Queued is when the first delivery of this job was received.
	Queued time.Time
	// Merged counts the deliveries coalesced into this job after the first.
	Merged int
}

// Key is the coalescing key: one apply for the whole fleet, one drift per
// target repo, one check per control-repo pull request (or commit), one tenant check per pull
// request of a workspace or cluster repo (a burst of pushes is one check, of the newest head),
// or per commit for a re-run (PR 0: a re-run of an older head must not take the place of the
// newest head's check, which the protection waits for).
func (j Job) Key() string {
	switch j.Kind {
	case KindApply:
		return string(KindApply)
	case KindCheck, KindTenant:
		if j.PR > 0 {
			return string(j.Kind) + ":" + strings.ToLower(j.Repo) + "#" + strconv.Itoa(j.PR)
		}
		return string(j.Kind) + ":" + strings.ToLower(j.Repo) + "@" + j.SHA
	default:
		return string(j.Kind) + ":" + strings.ToLower(j.Repo)
	}
}

// merge folds a newer job with the same key into j.
func (j Job) merge(newer Job) Job {
	newer.Queued = earliest(j.Queued, newer.Queued)
	newer.Incremental = j.Incremental && newer.Incremental
	newer.Access = j.Access || newer.Access
	newer.Merged = j.Merged + newer.Merged + 1
	if newer.SHA == "" {
		newer.SHA = j.SHA
	}
	if newer.CheckRun == 0 && newer.SHA == j.SHA {
		newer.CheckRun = j.CheckRun // the stuck run of the same head is still to complete
	}
	if newer.Base == "" {
		newer.Base = j.Base
	}
	if newer.Author == "" {
		newer.Author = j.Author
	}
	return newer
}

// earliest returns the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
