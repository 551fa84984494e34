package webhook

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// reports is the service's retained state behind app.Reports.
type reports struct {
	source  string
	control *app.ControlRepo
	repos   map[string]app.RepoReport // by lower-case "owner/name"
	// run is the apply in progress (the repos it plans, its phase); nil when none runs.
	run *app.StatusRun
	// live holds what deliveries said of target repos (Flux's commit statuses, a human's push
	// to the bot branch), by lower-case "owner/name", each numbered from seq: a run that read
	// a repo before an event arrived keeps the event's word when it records its result (see
	// keep); once a run that began after an event recorded the repo, the event is dropped.
	live map[string]*liveRepo
	seq  uint64
}

// liveRepo is what deliveries said of one target repo, newest per status context.
type liveRepo struct {
	statuses map[string]liveStatus
	push     *livePush
}

type liveStatus struct {
	seq uint64
	st  app.LiveStatus
}

type livePush struct {
	seq uint64
	p   app.LivePush
}

// maxLiveContexts bounds the statuses kept per repo (one per Flux object reporting on it); a
// repo's further contexts are left to its next reconcile.
const maxLiveContexts = 64

// since is where a run starts reading: events numbered after it may be newer than what the
// run reads, and are kept over its results.
func (s *Service) since() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reports.seq
}

// keep records the results of an apply at sha that began reading at since. A run over the
// whole fleet replaces every result (a repo that left the control repo leaves the reports
// too); a run limited to some repos (a drift or incremental apply) replaces theirs only.
func (s *Service) keep(sha string, repo *app.ControlRepo, rep *app.Result, full bool, since uint64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.reports
	r.source, r.control = sha, repo
	if full || r.repos == nil {
		r.repos = map[string]app.RepoReport{}
	}
	if rep == nil {
		return
	}
	for _, res := range rep.Results {
		r.store(app.RepoReport{Result: res, Source: firstOf(rep.Source, sha), At: now}, since)
	}
	if full {
		for key := range r.live {
			if _, ok := r.repos[key]; !ok {
				delete(r.live, key)
			}
		}
	}
}

// keepOne records one repo's result as the run finishes it (an apply of a large fleet takes
// minutes: the status pages show each repo as soon as it is done).
func (s *Service) keepOne(sha string, res app.RepoResult, since uint64) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reports.repos == nil {
		s.reports.repos = map[string]app.RepoReport{}
	}
	s.reports.store(app.RepoReport{Result: res, Source: sha, At: now}, since)
}

// store records rr, read by a run that began at since, with what deliveries said of the repo
// since then taken over it; the events the run read after are dropped.
func (r *reports) store(rr app.RepoReport, since uint64) {
	key := strings.ToLower(rr.Result.Repo)
	if l := r.live[key]; l != nil {
		l.forget(since)
		rr.Result = l.over(rr.Result)
		if l.empty() {
			delete(r.live, key)
		}
	}
	r.repos[key] = rr
}

// forget drops the events numbered up to since: a run beginning after them read their effect.
func (l *liveRepo) forget(since uint64) {
	for c, st := range l.statuses {
		if st.seq <= since {
			delete(l.statuses, c)
		}
	}
	if l.push != nil && l.push.seq <= since {
		l.push = nil
	}
}

func (l *liveRepo) empty() bool { return len(l.statuses) == 0 && l.push == nil }

// over takes the kept events over res, in the order they arrived.
func (l *liveRepo) over(res app.RepoResult) app.RepoResult {
	sts := make([]liveStatus, 0, len(l.statuses))
	for _, st := range l.statuses {
		sts = append(sts, st)
	}
	sort.Slice(sts, func(a, b int) bool { return sts[a].seq < sts[b].seq })
	pushed := false
	for _, st := range sts {
		if l.push != nil && !pushed && l.push.seq < st.seq {
			res, _ = app.ObserveBotPush(res, l.push.p)
			pushed = true
		}
		res, _ = app.ObserveStatus(res, st.st)
	}
	if l.push != nil && !pushed {
		res, _ = app.ObserveBotPush(res, l.push.p)
	}
	return res
}

// Observation is what a delivery did to the stored report of its repo.
type Observation string

// Observations.
const (
	// Observed: the repo's row now shows what the delivery said.
	Observed Observation = "observed"
	// ObservedLater: the delivery is about a commit the repo's last result did not see (its
	// default branch moved): kept, it shows once a reconcile observes that commit.
	ObservedLater Observation = "kept for the next reconcile of the repo"
	// NotObservedRepo, NotObservedBranch, NotObservedPR: no target repo of this service's
	// reports, or nothing the delivery says applies (a push to another branch, no open pull
	// request of fleetbot's).
	NotObservedRepo   Observation = "not a target repo fleetbot reconciled"
	NotObservedBranch Observation = "not fleetbot's branch"
	NotObservedPR     Observation = "no open pull request of fleetbot's"
)

// ObserveStatus takes Flux's commit status on repo ("owner/name") into the repo's stored
// report (its status page row), without a reconcile and without a request: its default branch
// head's health, the failing Kustomization or HelmRelease, its message and link. A status on
// another commit is kept until a reconcile observes that commit. Repos the service has no
// result of are not kept: what an event can make it hold is bounded by the fleet.
func (s *Service) ObserveStatus(repo string, st app.LiveStatus) Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.reports
	key := strings.ToLower(repo)
	rr, ok := r.repos[key]
	if !ok {
		return NotObservedRepo
	}
	l := r.liveOf(key)
	if _, known := l.statuses[st.Context]; known || len(l.statuses) < maxLiveContexts {
		r.seq++
		l.statuses[st.Context] = liveStatus{seq: r.seq, st: st}
	}
	res, applied := app.ObserveStatus(rr.Result, st)
	if !applied {
		return ObservedLater
	}
	rr.Result = res
	r.repos[key] = rr
	return Observed
}

// ObserveBotPush takes a push by someone other than fleetbot to repo's branch into the repo's
// stored report: a push to fleetbot's branch (the control repo's pullRequests.branch) of an
// open pull request blocks it, as the next reconcile will say. No request.
func (s *Service) ObserveBotPush(repo string, p app.LivePush) Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.reports
	key := strings.ToLower(repo)
	rr, ok := r.repos[key]
	if !ok {
		return NotObservedRepo
	}
	if p.Branch != r.control.Fleet().PRBranch {
		return NotObservedBranch
	}
	res, applied := app.ObserveBotPush(rr.Result, p)
	if !applied {
		return NotObservedPR
	}
	r.seq++
	r.liveOf(key).push = &livePush{seq: r.seq, p: p}
	rr.Result = res
	r.repos[key] = rr
	return Observed
}

func (r *reports) liveOf(key string) *liveRepo {
	if r.live == nil {
		r.live = map[string]*liveRepo{}
	}
	l := r.live[key]
	if l == nil {
		l = &liveRepo{statuses: map[string]liveStatus{}}
		r.live[key] = l
	}
	return l
}

// trackRun makes the apply opts asks for record, once it claimed its target repos, the run
// in progress (beginRun) and its phases; the function returned ends it.
func (s *Service) trackRun(opts *app.Request, sha string, fl *app.Fleet) (end func()) {
	var run *app.StatusRun // set before the run's workers start, read by them
	claim := opts.Claim
	opts.Claim = func(ctx context.Context, only []string) error {
		if claim != nil {
			if err := claim(ctx, only); err != nil {
				return err
			}
		}
		run = s.beginRun(sha, fl, only)
		return nil
	}
	opts.Step = func(phase string, done, _ int) {
		if run != nil {
			s.step(run, phase, done)
		}
	}
	return func() {
		if run != nil {
			s.endRun(run)
		}
	}
}

// beginRun records an apply at sha of fl starting to plan the target repos named in only (nil:
// every target repo this service owns): the status pages show a row for each and how far it
// is. The first apply of a fleet also names the control repo, for the rows' labels and waves.
func (s *Service) beginRun(sha string, fl *app.Fleet, only []string) *app.StatusRun {
	named := map[string]bool{}
	for _, n := range only {
		named[strings.ToLower(n)] = true
	}
	run := &app.StatusRun{Source: sha, Started: time.Now()}
	for _, t := range fl.Targets {
		if (only != nil && !named[strings.ToLower(t.Repo)]) || (only == nil && !s.cfg.Runner.Owns(t.Repo)) {
			continue
		}
		run.Repos = append(run.Repos, app.StatusRunRepo{Repo: t.FullName(), Kind: t.Kind, Name: t.Name})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports.run = run
	if s.reports.control == nil {
		s.reports.source, s.reports.control = sha, fl.Repo
	}
	return run
}

// step records how far run is: its phase and the repos it planned.
func (s *Service) step(run *app.StatusRun, phase string, done int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run.Phase = phase
	if phase == app.PhasePlan {
		run.Planned = done
	}
}

// endRun records that run is over.
func (s *Service) endRun(run *app.StatusRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reports.run == run {
		s.reports.run = nil
	}
}

// app.Reports returns the newest result of every target repo, as of the service's last applies and
// the deliveries since, and the apply in progress.
func (s *Service) Reports() app.Reports {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := app.Reports{Source: s.reports.source, Control: s.reports.control, Repos: make([]app.RepoReport, 0, len(s.reports.repos))}
	for _, r := range s.reports.repos {
		out.Repos = append(out.Repos, r)
	}
	if run := s.reports.run; run != nil {
		c := *run // its repos never change; its phase does, under s.mu
		out.Run = &c
	}
	sortReports(out.Repos)
	return out
}

func sortReports(rs []app.RepoReport) {
	sort.Slice(rs, func(a, b int) bool { return rs[a].Result.Repo < rs[b].Result.Repo })
}
