package webhook

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
)

// drift reconciles the one target repo of j.
func (s *Service) drift(ctx context.Context, j Job) error {
	return s.ExecuteBatch(ctx, []Job{j})[0]
}

// ExecuteBatch reconciles the target repos of drift jobs (of one owner, as Queue.NextBatch
// hands them out) in one apply limited to those repos: the control head, the org (teams,
// managed repos) and the rollout state are read once for all of them, not once per job. It
// returns each job's error at its index: the failure of that job's repo, or the run's when
// the run as a whole failed. A drift on a repo outside the platform owner or this replica's
// shard is ignored (nil), as for a single job.
func (s *Service) ExecuteBatch(ctx context.Context, jobs []Job) []error {
	errs := make([]error, len(jobs))
	live := s.admitDrifts(ctx, jobs, errs)
	if len(live) == 0 {
		return errs
	}
	e, err := s.headEntry(ctx)
	if err != nil {
		for _, i := range live {
			errs[i] = err
		}
		return errs
	}
	s.reconcileDrifts(ctx, e, jobs, live, errs)
	return errs
}

// StageBatch implements jobqueue.Stager: it reads the control repo's head and loads and renders
// it (once per commit, shared with every job of that commit), and returns the function that
// reconciles a batch of drift jobs against that head as ExecuteBatch does. While a new head
// renders, the Pool adds the drifts arriving meanwhile to the waiting batch.
func (s *Service) StageBatch(ctx context.Context) (func(context.Context, []Job) []error, error) {
	e, err := s.headEntry(ctx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, jobs []Job) []error {
		errs := make([]error, len(jobs))
		if live := s.admitDrifts(ctx, jobs, errs); len(live) > 0 {
			s.reconcileDrifts(ctx, e, jobs, live, errs)
		}
		return errs
	}, nil
}

// reconcileDrifts reconciles the repos of jobs[live] against e (the control repo at a commit)
// in one apply and sets errs of those jobs.
func (s *Service) reconcileDrifts(ctx context.Context, e *fleetEntry, jobs []Job, live []int, errs []error) {
	fl := e.fleet
	var only []string
	byName := map[string][]int{} // the jobs of each repo, by lower-case name
	for _, i := range live {
		j := jobs[i]
		owner, name, _ := strings.Cut(j.Repo, "/")
		if !strings.EqualFold(owner, fl.Owner()) {
			s.log.Debug("drift on a repo outside the platform owner; ignored", "repo", j.Repo, "delivery", j.Delivery)
			continue
		}
		if !inFleet(fl, j.Repo) {
			// Info, not debug: an event GitHub sent about a repo fleetbot does not manage (a
			// ruleset or a protection changed on some other repo of the org) is worth a line.
			s.log.Info("drift on a repo not in the fleet; ignored", "repo", j.Repo, "reason", j.Reason, "delivery", j.Delivery,
				"why", "the control repo declares no cluster or workspace repo of this name")
			continue
		}
		if !s.cfg.Runner.Owns(name) {
			s.log.Debug("drift on a repo another shard owns; its resync covers it", "repo", j.Repo, "delivery", j.Delivery)
			continue
		}
		key := strings.ToLower(name)
		if byName[key] == nil {
			only = append(only, name)
		}
		byName[key] = append(byName[key], i)
	}
	if len(only) == 0 {
		return
	}
	// One run for the batch: it reads access afresh when any of its events may have changed it.
	run := jobs[byName[strings.ToLower(only[0])][0]]
	for _, i := range live {
		run.Access = run.Access || jobs[i].Access
	}
	rep, err := s.applyReport(ctx, run, only, e, jobqueue.NoLease{})
	if err != nil {
		attributeDrifts(errs, byName, len(only), rep, err)
	}
}

// inFleet reports whether fullName ("owner/name", any case) is a target repo of fl, one being
// removed included (its removal is fleetbot's to finish).
func inFleet(fl *app.Fleet, fullName string) bool {
	for _, t := range fl.Targets {
		if strings.EqualFold(t.FullName(), fullName) {
			return true
		}
	}
	return false
}

// admitDrifts returns the indexes of the jobs to reconcile, setting errs of the others: a job
// that is not a drift, or one the BeforeJob hook fails.
func (s *Service) admitDrifts(ctx context.Context, jobs []Job, errs []error) (live []int) {
	for i, j := range jobs {
		if j.Kind != KindDrift {
			errs[i] = fmt.Errorf("drift batch: job %d is a %s job, not a drift", i, j.Kind)
			continue
		}
		if s.cfg.BeforeJob != nil {
			if err := s.cfg.BeforeJob(ctx, j); err != nil {
				errs[i] = err
				continue
			}
		}
		live = append(live, i)
	}
	return live
}

// attributeDrifts sets errs of the jobs in byName from a run over repos repos that returned err
// (and rep, nil when the run did not start): each job gets its own repo's failure, the jobs of
// repos that converged none; a run that failed as a whole fails every job.
func attributeDrifts(errs []error, byName map[string][]int, repos int, rep *app.Result, err error) {
	var failed []app.RepoResult
	if rep != nil {
		failed = rep.Failed()
	}
	perRepo := make(map[int]error)
	for _, r := range failed {
		_, name, _ := strings.Cut(r.Repo, "/")
		for _, i := range byName[strings.ToLower(name)] {
			perRepo[i] = fmt.Errorf("reconcile failed in a batch of %d drifted repos: %w", repos, r.Err)
		}
	}
	if repos == 1 || len(perRepo) == 0 {
		// One repo (the error is the one a lone drift job has always had), or the run failed
		// as a whole (the org unreadable, the control repo invalid...) or on a repo no job
		// names: every job failed with it.
		for _, ix := range byName {
			for _, i := range ix {
				errs[i] = err
			}
		}
		return
	}
	for i, e := range perRepo {
		errs[i] = e
	}
}
