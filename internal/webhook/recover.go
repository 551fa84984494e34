package webhook

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Recovery of control pull request checks: level-triggered, from what GitHub shows. A check
// job starts from a pull_request or check_run delivery; a delivery acknowledged and then lost
// with the process (killed before the job ran) leaves a head with no check, a kill during the
// job leaves its check run in_progress forever. Every resync therefore lists the control repo's
// open pull requests and queues the check of any head whose newest fleetbot check run is not
// completed: none (or only queued), or in_progress for longer than StuckAfter (that run is
// resumed: its job completes it, so no second run of the name is left spinning).

// DefaultStuckCheck is how long a control pull request's check run may stay in_progress before
// a resync takes it for abandoned (its process died) and runs the check again. A plan of a
// 1,000-repo fleet takes seconds to a few minutes; a check still running after this long is not.
const DefaultStuckCheck = 30 * time.Minute

// OpenPullRequest is an open pull request of the control repo (internal/checkrun).
type OpenPullRequest = checkrun.OpenPullRequest

// CheckState is fleetbot's newest check run on a commit (internal/checkrun).
type CheckState = checkrun.State

// PendingChecks reads what the recovery of control pull request checks needs from GitHub.
type PendingChecks interface {
	// OpenPullRequests lists the control repo's open pull requests (a conditional request:
	// an unchanged list costs no rate limit).
	OpenPullRequests(ctx context.Context) ([]OpenPullRequest, error)
	// LatestCheck returns fleetbot's newest check run (of its check name, from its App) on
	// commit sha; found is false when there is none.
	LatestCheck(ctx context.Context, sha string) (state CheckState, found bool, err error)
}

// RecoverChecks returns the check jobs a resync queues: one per open control pull request whose
// head has no completed fleetbot check run, and none when no PendingChecks is configured. A
// head seen completed is remembered (a commit's completed check stays completed), so a resync
// costs one list of the open pull requests plus one read of the check runs of each head not
// seen completed yet. An error reading one head's check runs skips that head (the next resync
// asks again) and is returned with the jobs of the others.
func (s *Service) RecoverChecks(ctx context.Context, control string) ([]Job, error) {
	src := s.cfg.Pending
	if src == nil {
		return nil, nil
	}
	prs, err := src.OpenPullRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the open pull requests of %s: %w", control, err)
	}
	now := s.cfg.Runner.Now()
	stuck := s.cfg.StuckCheck
	if stuck <= 0 {
		stuck = DefaultStuckCheck
	}
	open := make(map[string]bool, len(prs))
	var jobs []Job
	var errs []string
	for _, p := range prs {
		open[p.Head] = true
		if s.checkDone(p.Head) {
			continue
		}
		st, found, err := src.LatestCheck(ctx, p.Head)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s#%d: %v", control, p.Number, err))
			continue
		}
		j := Job{Kind: KindCheck, Repo: control, SHA: p.Head, PR: p.Number, Base: p.Base, Author: p.Author, Queued: now}
		switch {
		case !found || st.Status == "queued":
			j.Reason = ReasonRecoverMissing
		case st.Status == "completed":
			s.rememberCheckDone(p.Head)
			continue
		case !st.StartedAt.IsZero() && now.Sub(st.StartedAt) < stuck:
			continue // running, here or in a process that may still finish it
		default:
			j.Reason, j.CheckRun = ReasonRecoverStuck, st.ID
		}
		s.log.Info("control pull request without a completed check; queued", "repo", control, "pr", p.Number,
			"sha", report.ShortSHA(p.Head), "reason", j.Reason, "check_run", st.ID)
		jobs = append(jobs, j)
	}
	s.forgetChecksDone(open)
	if len(errs) > 0 {
		return jobs, fmt.Errorf("reading the check runs of %s", strings.Join(errs, "; "))
	}
	return jobs, nil
}

// Reasons of the check jobs a resync queues.
const (
	// ReasonRecoverMissing: an open control pull request's head has no fleetbot check run.
	ReasonRecoverMissing = "recover.missing"
	// ReasonRecoverStuck: its check run stayed in_progress longer than the bound.
	ReasonRecoverStuck = "recover.stuck"
)

// checkDone reports whether fleetbot's check of head was seen completed.
func (s *Service) checkDone(head string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checked[head]
}

// rememberCheckDone records that fleetbot's check of head completed.
func (s *Service) rememberCheckDone(head string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked == nil {
		s.checked = map[string]bool{}
	}
	s.checked[head] = true
}

// forgetChecksDone keeps only the heads of open pull requests: the memory stays as small as
// the list of open pull requests.
func (s *Service) forgetChecksDone(open map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.checked {
		if !open[h] {
			delete(s.checked, h)
		}
	}
}
