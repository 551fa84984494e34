package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Recovery of tenant checks: level-triggered, as the control pull requests' (recover.go). A
// tenant check starts from a pull_request or check_run delivery of a workspace or cluster repo;
// a kill after the delivery was acknowledged leaves its head without the check its protection
// requires, a kill during the job leaves the run in_progress. Every resync therefore lists the
// open pull requests of the workspace and cluster repos this replica owns and queues the tenant
// check of any head whose newest tenant check run is not completed: none (or only queued), or
// in_progress for longer than StuckCheck (that run is resumed: its job completes it).

// TenantPull is an open pull request of a workspace or cluster repo and its head commit.
type TenantPull struct {
	// Repo is the repo, "owner/name".
	Repo   string
	Number int
	Head   string
}

// TenantPulls reads what the recovery of tenant checks needs from GitHub, in batches: a
// resync over 1,000 repos must cost a few requests, not one per repo.
type TenantPulls interface {
	// OpenPullRequests lists the open pull requests of owner's repos (names without the owner).
	OpenPullRequests(ctx context.Context, owner string, repos []string) ([]TenantPull, error)
	// LatestChecks returns fleetbot's newest tenant check run (its check name, from its App) on
	// the head of each of pulls; a head without one is absent.
	LatestChecks(ctx context.Context, owner string, pulls []TenantPull) (map[TenantPull]CheckState, error)
}

// Recover returns the jobs a resync adds to its apply: the checks of the control pull requests
// (RecoverChecks) and the tenant checks of the workspace and cluster repos' pull requests
// (RecoverTenantChecks) whose head has no completed check run. What could not be read is
// returned as an error beside the jobs found; the next resync asks again.
func (s *Service) Recover(ctx context.Context, control string) ([]Job, error) {
	jobs, errControl := s.RecoverChecks(ctx, control)
	tenant, errTenant := s.RecoverTenantChecks(ctx)
	return append(jobs, tenant...), errors.Join(errControl, errTenant)
}

// RecoverTenantChecks returns the tenant check jobs a resync queues: one per open pull request
// of a workspace or cluster repo of the fleet at the control head, owned by this replica,
// whose head has no completed tenant check run; none without a tenant check or a TenantPulls,
// or where the App may not write check runs. A head seen completed is remembered, so a resync
// costs one batched list of the open pull requests plus one batched read of the check runs of
// the heads not seen completed yet.
func (s *Service) RecoverTenantChecks(ctx context.Context) ([]Job, error) {
	src := s.cfg.TenantPulls
	if src == nil || s.cfg.Tenants == nil || s.cfg.TenantCheck.Context == "" {
		return nil, nil
	}
	e, err := s.headEntry(ctx)
	if err != nil {
		return nil, fmt.Errorf("recovering tenant checks: %w", err)
	}
	byOwner := map[string][]string{}
	for _, full := range e.fleet.TenantRepos() {
		owner, name, _ := strings.Cut(full, "/")
		s.mu.Lock()
		granted, known := s.granted[strings.ToLower(owner)]
		s.mu.Unlock()
		if (known && !granted) || !s.cfg.Runner.Owns(name) {
			continue // no check run can be written there; another replica's repo
		}
		byOwner[owner] = append(byOwner[owner], name)
	}
	open := map[string]bool{}
	var jobs []Job
	var errs []error
	for _, owner := range sortedKeys(byOwner) {
		found, err := s.recoverTenantOwner(ctx, owner, byOwner[owner], open)
		jobs = append(jobs, found...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		s.forgetTenantDone(open) // only after a whole read: a failed owner's heads stay known
	}
	return jobs, errors.Join(errs...)
}

// recoverTenantOwner is RecoverTenantChecks for the repos of one owner; it adds the open heads
// to open.
func (s *Service) recoverTenantOwner(ctx context.Context, owner string, repos []string, open map[string]bool) ([]Job, error) {
	src := s.cfg.TenantPulls
	pulls, err := src.OpenPullRequests(ctx, owner, repos)
	if err != nil {
		return nil, fmt.Errorf("listing the open pull requests of %d workspace and cluster repos of %s: %w", len(repos), owner, err)
	}
	var unseen []TenantPull
	for _, p := range pulls {
		open[tenantKey(p)] = true
		if !s.tenantDone(tenantKey(p)) {
			unseen = append(unseen, p)
		}
	}
	if len(unseen) == 0 {
		return nil, nil
	}
	states, err := src.LatestChecks(ctx, owner, unseen)
	if err != nil {
		return nil, fmt.Errorf("reading the tenant check runs of %d pull request heads of %s: %w", len(unseen), owner, err)
	}
	now := s.cfg.Runner.Now()
	stuck := s.cfg.StuckCheck
	if stuck <= 0 {
		stuck = DefaultStuckCheck
	}
	var jobs []Job
	for _, p := range unseen {
		st, found := states[p]
		j := Job{Kind: KindTenant, Repo: p.Repo, SHA: p.Head, PR: p.Number, Queued: now}
		switch {
		case !found || st.Status == "queued":
			j.Reason = ReasonRecoverMissing
		case st.Status == "completed":
			s.rememberTenantDone(tenantKey(p))
			continue
		case !st.StartedAt.IsZero() && now.Sub(st.StartedAt) < stuck:
			continue // running, here or in a process that may still finish it
		default:
			j.Reason, j.CheckRun = ReasonRecoverStuck, st.ID
		}
		s.log.Info("pull request without a completed tenant check; queued", "repo", p.Repo, "pr", p.Number,
			"sha", report.ShortSHA(p.Head), "reason", j.Reason, "check_run", st.ID)
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func tenantKey(p TenantPull) string { return strings.ToLower(p.Repo) + "@" + p.Head }

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// tenantDone reports whether the tenant check of key (repo@head) was seen completed.
func (s *Service) tenantDone(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenantChecked[key]
}

func (s *Service) rememberTenantDone(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tenantChecked == nil {
		s.tenantChecked = map[string]bool{}
	}
	s.tenantChecked[key] = true
}

// forgetTenantDone keeps only the heads of open pull requests.
func (s *Service) forgetTenantDone(open map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.tenantChecked {
		if !open[k] {
			delete(s.tenantChecked, k)
		}
	}
}
