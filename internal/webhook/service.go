package webhook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// ControlSource reads the control repo from its forge.
type ControlSource interface {
	// Head returns the commit at the tip of the default branch.
	Head(ctx context.Context) (string, error)
	// Load reads and validates the control repo at commit sha.
	Load(ctx context.Context, sha string) (*app.ControlRepo, error)
	// Tree returns the control repo's files at commit sha.
	Tree(ctx context.Context, sha string) (fs.FS, error)
	// PullRequest returns a pull request's base commit and author.
	PullRequest(ctx context.Context, number int) (base, author string, err error)
}

// Verdict judges a control-repo change beyond its plan: "fleetbot check
// control" (who may make the change, which personas it reaches). The check
// run reports the plan and, when a Verdict is configured, its conclusion and
// markdown.
type Verdict interface {
	CheckControl(ctx context.Context, in VerdictInput) (VerdictResult, error)
}

// VerdictInput is one control-repo change.
type VerdictInput struct {
	// Base and Head are the control repo files before and after.
	Base, Head fs.FS
	// BaseSHA and HeadSHA are their commits.
	BaseSHA, HeadSHA string
	// Owner is the platform owner (the org whose teams count).
	Owner string
	// Author is the pull request author's login ("" when unknown).
	Author string
	// BaseFleet and HeadFleet are Base and Head as serve already loaded and rendered them
	// (nil when it has not, or they do not validate): the verdict then does not load and
	// render them again.
	BaseFleet, HeadFleet *app.Fleet
}

// VerdictResult is a Verdict's finding.
type VerdictResult struct {
	// Conclusion is a check conclusion: success, neutral or failure.
	Conclusion string
	// Verdict names it in the check run's title ("allowed", ...).
	Verdict string
	// Markdown explains it; it is appended to the check run text.
	Markdown string
}

// ServiceConfig configures a Service. Control and Runner are required; Checks is required for
// check jobs.
type ServiceConfig struct {
	Control ControlSource
	// Runner is the application's door of plan and apply (app.Config.ServiceRunner): it opens
	// the forges of target repos, renders with its long-lived renderer (kustomize builds cached
	// between jobs), keeps the baselines that make a push incremental, and holds the per-run
	// concurrency, the shard, the version and the rollout gate's clock.
	Runner *app.Runner
	// Checks writes check runs on the control repo.
	Checks CheckRuns
	// RolloutChecks, when set, shows a rollout's progress as a check run on the control-repo
	// commit being rolled out, updated by every full apply.
	RolloutChecks RolloutChecks
	// Rollout, when set, learns from every full apply which cluster repos take part in the
	// rollout in progress and when its verdict changes by time alone (see RolloutWatch).
	Rollout *RolloutWatch
	// Verdict, when set, adds "check control" to check runs.
	Verdict Verdict
	// Logger and Metrics may be nil.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// BeforeJob, when set, runs before each job (for a drift job, once its batch has read and
	// rendered the control head); tests inject faults with it.
	BeforeJob func(ctx context.Context, j Job) error
	// TenantCheck, when its Context is set, is the check run serve posts on every pull request
	// of a workspace or cluster repo (tenant jobs, through Tenants), required from its App
	// (AppID) by the branch protection of those repos in every plan and apply, on the owners
	// where CanCheck says the App may write check runs.
	TenantCheck app.RequiredCheck
	// Tenants reads workspace and cluster repos and writes their tenant check runs.
	Tenants TenantChecks
	// Requeue, when set, pushes a job at a known time (Queue.RetryAt): a run that deferred
	// target repos until a known time (a rate limit's reset, the write budget's next slot)
	// queues a drift of each of them for then, and a run deferred as a whole queues itself
	// again; nil leaves them to the next resync.
	Requeue func(j Job, at time.Time)
	// CanCheck reports whether the App's installation on owner may write check runs (checks:
	// write); nil: it may. Without it the check is not required there (nothing could pass it),
	// and serve says so in its log.
	CanCheck func(ctx context.Context, owner string) (bool, error)
	// Pending, when set, lets every resync find the open control pull requests whose head has
	// no completed check run (RecoverChecks); StuckCheck is how long a check run may stay
	// in_progress before it is taken for abandoned (default DefaultStuckCheck).
	Pending    PendingChecks
	StuckCheck time.Duration
	// TenantPulls, when set with a tenant check, lets every resync find the open pull requests
	// of workspace and cluster repos whose head has no completed tenant check run
	// (RecoverTenantChecks; stuck in_progress after StuckCheck too).
	TenantPulls TenantPulls
	// StepRepos bounds the target repos one step of a full apply plans (default
	// DefaultStepRepos; see applyInSteps).
	StepRepos int
	// StepsFile, when set, keeps the progress of a full apply in steps across restarts.
	StepsFile string
}

// Service executes jobs: it loads the control repo at the right commit,
// renders it (cached per commit) and runs the application's one door,
// app.Runner.Run: an apply for apply and drift jobs, a plan on a read-only
// forge for check jobs.
type Service struct {
	cfg ServiceConfig
	log *slog.Logger

	mu     sync.Mutex
	fleets []*fleetEntry // most recently used first
	// renders bounds the commits loaded and rendered at once (maxRenders): with many workers,
	// a burst of pull request checks would otherwise hold as many fleets in memory.
	renders chan struct{}
	// reports keeps the newest result of each target repo (see Reports).
	reports reports
	// rolloutSHA is the control commit whose rollout check run was updated last: a newer
	// revision's rollout supersedes it unless it was done (rolloutDone).
	rolloutSHA  string
	rolloutDone bool
	// granted is, per owner (lower case), whether the App may write check runs there, as last
	// asked (CanCheck); the fleets kept were rendered with it.
	granted map[string]bool
	// checked are the control pull request heads whose check run was seen completed
	// (RecoverChecks asks GitHub about the others only).
	checked map[string]bool
	// tenantChecked are the workspace and cluster repos' pull request heads ("owner/name@sha",
	// lower-case repo) whose tenant check run was seen completed (RecoverTenantChecks).
	tenantChecked map[string]bool
	// steps is the progress of the full apply in steps under way (see applyInSteps);
	// stepsClosed the control commit whose steps ended last (its later applies are whole).
	steps       *stepProgress
	stepsClosed string
}

// fleetEntry is the control repo at one commit, loaded and rendered once.
type fleetEntry struct {
	sha   string
	once  sync.Once
	fleet *app.Fleet
	err   error
}

// fleetCache is how many rendered commits are kept (the default branch and
// a few pull request heads).
const fleetCache = 4

// maxRenders is how many commits a Service loads and renders at once; the jobs of other
// commits wait (a drift batch waiting takes in the drifts arriving meanwhile).
const maxRenders = 4

// NewService returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Control == nil || cfg.Runner == nil {
		return nil, errors.New("webhook service: control source and runner are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log, renders: make(chan struct{}, maxRenders), granted: map[string]bool{}}, nil
}

// PreparesClaims implements jobqueue.Preparer: an apply job reads and renders the control repo
// while drifts run, and claims the target repos it plans (through its Lease) only then.
func (s *Service) PreparesClaims() bool { return true }

// Execute runs one job; an apply job claims the target repos it writes through lease (nil:
// jobqueue.NoLease, it claims nothing).
func (s *Service) Execute(ctx context.Context, j Job, lease jobqueue.Lease) error {
	if lease == nil {
		lease = jobqueue.NoLease{}
	}
	if s.cfg.BeforeJob != nil {
		if err := s.cfg.BeforeJob(ctx, j); err != nil {
			return err
		}
	}
	switch j.Kind {
	case KindApply:
		return s.apply(ctx, j, lease)
	case KindDrift:
		return s.drift(ctx, j)
	case KindCheck:
		return s.check(ctx, j)
	case KindTenant:
		return s.tenant(ctx, j)
	}
	return fmt.Errorf("unknown job kind %q", j.Kind)
}

// fleetEntry is the control repo at sha, loaded and rendered once per commit (cached).
func (s *Service) fleetEntry(ctx context.Context, sha string) *fleetEntry {
	s.mu.Lock()
	var e *fleetEntry
	for i, f := range s.fleets {
		if f.sha == sha {
			// Least recently used goes first: the default branch's head, read by every drift
			// job, stays while pull request heads come and go.
			e = f
			copy(s.fleets[1:i+1], s.fleets[:i])
			s.fleets[0] = e
			break
		}
	}
	if e == nil {
		e = &fleetEntry{sha: sha}
		s.fleets = append([]*fleetEntry{e}, s.fleets...)
		if len(s.fleets) > fleetCache {
			s.fleets = s.fleets[:fleetCache]
		}
	}
	s.mu.Unlock()
	e.once.Do(func() {
		select {
		case s.renders <- struct{}{}:
			defer func() { <-s.renders }()
		case <-ctx.Done():
			e.err = ctx.Err()
			return
		}
		repo, err := s.cfg.Control.Load(ctx, sha)
		if err == nil {
			e.fleet, err = s.cfg.Runner.Render(repo)
		}
		if err == nil {
			err = s.requireTenantCheck(ctx, e.fleet)
		}
		e.err = err
	})
	if e.err != nil && !isInvalid(e.err) {
		// Reading failed (network, rate limit, cancellation): try again next time.
		s.forget(e)
	}
	return e
}

func (s *Service) forget(e *fleetEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.fleets {
		if f == e {
			s.fleets = append(s.fleets[:i], s.fleets[i+1:]...)
			return
		}
	}
}

// isInvalid reports whether err says the control repo is invalid (a
// property of the commit, worth caching) rather than unreadable.
func isInvalid(err error) bool {
	var is app.Issues
	return errors.As(err, &is)
}

// apply reconciles the fleet at the control repo's head. A push job is incremental: it plans
// only the target repos whose desired state changed since the last converged apply (the
// baselines); other apply jobs (resync, installation changes) plan every repo and are the
// safety net.
func (s *Service) apply(ctx context.Context, j Job, lease jobqueue.Lease) error {
	if !j.Incremental {
		// A full apply (the resync, an installation's permissions accepted) asks again whether
		// the App may write check runs: the tenant check is required from then on.
		if err := s.regrant(ctx); err != nil {
			return err
		}
	}
	e, err := s.headEntry(ctx)
	if err != nil {
		return err
	}
	if !e.fleet.Repo.HasRollout() {
		// A rollout's applies weigh every cluster at once; other fleets converge many changed
		// repos in steps (applyInSteps).
		if stepped, err := s.applyInSteps(ctx, j, e, lease); stepped {
			return err
		}
	}
	_, err = s.applyReport(ctx, j, nil, e, lease)
	return err
}

// headEntry is the control repo at its head, loaded and rendered. A drift batch keeps the
// entry it staged: the fleet cache may drop it meanwhile (it holds a few commits), and its run
// must not render it again.
func (s *Service) headEntry(ctx context.Context) (*fleetEntry, error) {
	sha, err := s.cfg.Control.Head(ctx)
	if err != nil {
		return nil, err
	}
	e := s.fleetEntry(ctx, sha)
	if e.err != nil {
		return nil, fmt.Errorf("control repo at %s: %w", report.ShortSHA(sha), e.err)
	}
	return e, nil
}

// applyReport applies e, the control repo at a commit, loaded and rendered, and returns the
// run's report (nil when the run did not start); only, when set, restricts it to those target
// repos (a drift batch); an apply job claims what it writes through lease.
func (s *Service) applyReport(ctx context.Context, j Job, only []string, e *fleetEntry, lease jobqueue.Lease) (*app.Result, error) {
	sha, fl := e.sha, e.fleet
	log := s.log.With("delivery", j.Delivery, "kind", j.Kind)
	since := s.since()
	// The Runner decides from the trigger whether the run is full or incremental.
	req := app.Request{Mode: app.ModeApply, Trigger: app.TriggerResync, Scope: app.Scope{Repos: only}, Logger: log,
		Progress: func(r app.RepoResult) { s.keepOne(sha, r, since) }} // the status pages show each repo once done
	switch {
	case j.Kind == KindDrift:
		req.Trigger, req.AccessChanged = app.TriggerDrift, j.Access
	case j.Incremental:
		req.Trigger = app.TriggerPush
	}
	if j.Kind != KindDrift && fl.Repo.HasRollout() {
		s.cfg.Rollout.Begin(fl.ClusterRepos())
	}
	if j.Kind == KindApply {
		// The control repo is read and rendered; once the run knows its target repos (every
		// one, or the ones an incremental push changed), it claims them: the drifts of other
		// workers keep off them meanwhile, and go on elsewhere.
		req.Claim = func(ctx context.Context, only []string) error { return lease.Claim(ctx, repoNames(only), only == nil) }
		defer s.trackRun(&req, sha, fl)() // the status pages show how far it is
	}
	rep, err := s.cfg.Runner.Run(ctx, fl, req)
	// A forge that could not be opened is retryable (report.ReasonUnreachable), not deferred
	// until a known time: requeue leaves it to the next event or resync.
	s.requeue(j, rep, err, log)
	if rep != nil && only == nil && !rep.Incremental && rep.Refused == nil {
		// Only a full run weighs every cluster: a limited one may hold what a full one admits.
		s.rollout(ctx, sha, fl, rep, log)
	}
	if rep != nil {
		s.keep(sha, fl.Repo, rep, only == nil && !rep.Incremental, since)
		changed := 0
		for _, r := range rep.Results {
			if r.Changed() {
				changed++
			}
		}
		log.Info("fleet reconciled", "trigger", j.Repo, "source", report.ShortSHA(sha), "scope", rep.Scope,
			"repos", len(rep.Results), "changed", changed, "failed", len(rep.Failed()), "deferred", len(rep.Deferred()))
	}
	return rep, err
}

// requeue asks the queue to run again, at the time they may change by time alone, the repos of
// rep deferred until a known time (a drift of each), or j itself when the run as a whole was
// deferred until one (the org's read rate-limited). A repo held by a rollout wave is left to
// the rollout's own wake-up (RolloutWatch), which applies the whole fleet.
func (s *Service) requeue(j Job, rep *app.Result, err error, log *slog.Logger) {
	if s.cfg.Requeue == nil {
		return
	}
	retried := 0
	if rep != nil {
		for _, r := range rep.Results {
			o := r.Outcome()
			if o.Class != report.ClassDeferred || o.RetryAt.IsZero() || o.Reason == report.ReasonHeldByRollout {
				continue
			}
			s.cfg.Requeue(Job{Kind: KindDrift, Repo: r.Repo, Reason: "retry." + o.Reason}, o.RetryAt)
			log.Info("repo deferred; queued again at its retry time", "repo", r.Repo, "reason", o.Reason, "at", o.RetryAt.UTC().Format(time.RFC3339))
			retried++
		}
	}
	if o := report.ClassOf(err); retried == 0 && err != nil && o.Class == report.ClassDeferred && !o.RetryAt.IsZero() {
		again := j
		again.Delivery, again.Merged, again.Reason = "", 0, "retry."+o.Reason
		s.cfg.Requeue(again, o.RetryAt)
		log.Info("run deferred; queued again at its retry time", "reason", o.Reason, "at", o.RetryAt.UTC().Format(time.RFC3339))
	}
}

// check plans the control repo at the pull request head on the read-only
// forge and reports it as a check run.
func (s *Service) check(ctx context.Context, j Job) error {
	if s.cfg.Checks == nil {
		return errors.New("check job: no check runs configured")
	}
	id := j.CheckRun // a run left in_progress by a process that died: this job completes it
	if id == 0 {
		var err error
		if id, err = s.cfg.Checks.Start(ctx, j.SHA); err != nil {
			return err
		}
	}
	res := s.plan(ctx, j)
	fctx := ctx
	if ctx.Err() != nil {
		// Still tell GitHub the check ended, so it does not spin forever.
		res = checkrun.Result{Conclusion: checkrun.ConclusionCancelled, Title: "fleetbot stopped before finishing the plan",
			Summary: "fleetbot shut down during this check. Re-run it."}
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	s.log.Info("check run", "delivery", j.Delivery, "repo", j.Repo, "pr", j.PR, "sha", report.ShortSHA(j.SHA), "conclusion", res.Conclusion, "check_run", id)
	if err := s.cfg.Checks.Finish(fctx, id, res); err != nil {
		return err
	}
	s.rememberCheckDone(j.SHA)
	return nil
}

// plan computes a check result; every failure becomes its conclusion.
func (s *Service) plan(ctx context.Context, j Job) checkrun.Result {
	e := s.fleetEntry(ctx, j.SHA)
	fl, err := e.fleet, e.err
	var issues app.Issues
	switch {
	case errors.As(err, &issues):
		return invalidResult(issues)
	case err != nil:
		return checkrun.Result{Conclusion: checkrun.ConclusionNeutral, Title: "fleetbot could not read the control repo",
			Summary: "fleetbot could not read this commit; re-run the check.\n\n```\n" + err.Error() + "\n```\n"}
	}
	// The plan of what merging changes, on a read-only forge, over every shard (it writes
	// nothing but the check run): the Runner plans the target repos whose desired state at this
	// commit differs from what the last converged apply left them at, as the apply after the
	// merge will (every repo with rollout waves, or on a sharded replica).
	rep, err := s.cfg.Runner.Run(ctx, fl, app.Request{Mode: app.ModePlan, Trigger: app.TriggerCheck,
		Scope: app.Scope{AllShards: true}, Logger: s.log.With("delivery", j.Delivery, "kind", j.Kind)})
	if o := report.ClassOf(err); o.Reason == report.ReasonUnreachable {
		return checkrun.Result{Conclusion: o.Class.CheckConclusion(), Title: "fleetbot could not reach the target repos",
			Summary: "```\n" + err.Error() + "\n```\n"}
	}
	if errors.As(err, &issues) {
		// Found against the org (a team it does not have): invalid input, with file:line.
		return invalidResult(issues)
	}
	if err != nil {
		return checkrun.Result{Conclusion: report.ClassOf(err).Class.CheckConclusion(), Title: "fleetbot could not plan",
			Summary: "fleetbot could not plan this commit; re-run the check.\n\n```\n" + err.Error() + "\n```\n"}
	}
	var text strings.Builder
	if err := rep.WriteMarkdown(&text); err != nil {
		return checkrun.Result{Conclusion: checkrun.ConclusionNeutral, Title: "fleetbot could not render the plan", Summary: err.Error()}
	}
	res := planResult(rep, text.String(), len(fl.Targets))
	if rep.Rollout != nil {
		if p := rep.Rollout.CheckRun(); p.Changed > 0 {
			res.Summary += "\n\n### Rollout in waves\n\nOnce merged, this change reaches the clusters wave by wave (the states are today's; " +
				"the check run `" + checkrun.RolloutCheckName + "` on the merge commit follows the rollout).\n\n" + p.Summary
		}
	}
	if s.cfg.Verdict != nil {
		v := s.verdict(ctx, j, fl.Owner())
		res.Conclusion = worst(res.Conclusion, v.Conclusion)
		if v.Verdict != "" {
			res.Title += "; check control: " + v.Verdict
		}
		res.Summary += "\n\n" + v.Markdown
	}
	return res
}

// verdict runs "check control" on the pull request of j.
func (s *Service) verdict(ctx context.Context, j Job, owner string) VerdictResult {
	failed := func(err error) VerdictResult {
		return VerdictResult{Conclusion: checkrun.ConclusionNeutral, Markdown: "`fleetbot check control` could not run: " + err.Error()}
	}
	if j.PR > 0 && (j.Base == "" || j.Author == "") {
		base, author, err := s.cfg.Control.PullRequest(ctx, j.PR)
		if err != nil {
			return failed(err)
		}
		j.Base, j.Author = firstOf(j.Base, base), firstOf(j.Author, author)
	}
	if j.Base == "" {
		return failed(errors.New("the pull request's base commit is unknown"))
	}
	base, err := s.cfg.Control.Tree(ctx, j.Base)
	if err != nil {
		return failed(err)
	}
	head, err := s.cfg.Control.Tree(ctx, j.SHA)
	if err != nil {
		return failed(err)
	}
	// The head was loaded and rendered for the plan; the base is usually a default-branch
	// commit serve applied. Both come from the commits kept (loaded now if not).
	in := VerdictInput{Base: base, Head: head, BaseSHA: j.Base, HeadSHA: j.SHA, Owner: owner, Author: j.Author}
	if e := s.fleetEntry(ctx, j.SHA); e.err == nil {
		in.HeadFleet = e.fleet
	}
	if e := s.fleetEntry(ctx, j.Base); e.err == nil {
		in.BaseFleet = e.fleet
	}
	v, err := s.cfg.Verdict.CheckControl(ctx, in)
	if err != nil {
		return failed(err)
	}
	return v
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// planResult turns a plan report into a check result: failure when the
// plan is refused, else the conclusion of its most urgent repo's class
// (report.Class.CheckConclusion: success when every repo was decided or
// waits by itself, neutral when one could not be planned or needs a human,
// failure for invalid input); changes are what a control PR is for. A full plan counts the repos
// it planned (the control repo's access and removed repos included); an
// incremental one the fleet's target repos, of which it planned those whose
// desired state differs from the last converged apply's.
func planResult(rep *app.Result, markdown string, targets int) checkrun.Result {
	changed := 0
	for _, r := range rep.Results {
		if r.Changed() {
			changed++
		}
	}
	res := checkrun.Result{Conclusion: rep.Class().CheckConclusion(), Text: markdown}
	total := len(rep.Results)
	if rep.Incremental {
		total = max(total, targets)
	}
	res.Title = fmt.Sprintf("%d of %d target repos change", changed, total)
	switch failed := rep.Failed(); {
	case rep.Refused != nil:
		res.Conclusion = checkrun.ConclusionFailure
		res.Title = "plan refused: " + firstLine(rep.Refused.Error())
	case len(failed) > 0:
		res.Title += fmt.Sprintf("; %d could not be planned", len(failed))
	}
	res.Summary = fmt.Sprintf("Plan of source `%s`: %s. Merging this pull request makes fleetbot open or update one pull request per changed repo; nothing is written before.",
		report.ShortSHA(rep.Source), res.Title)
	if rep.Incremental {
		res.Summary += fmt.Sprintf(" Only the %d target repos whose desired state differs from what fleetbot's last converged apply left them at were read and planned; the desired state of the others is what that apply left them at.", len(rep.Results))
	}
	return res
}

// invalidResult reports a control repo that does not validate.
func invalidResult(issues app.Issues) checkrun.Result {
	res := checkrun.Result{Conclusion: checkrun.ConclusionFailure,
		Title:   fmt.Sprintf("invalid control repo: %d problem(s)", len(issues)),
		Summary: "The control repo does not validate at this commit; nothing would be written anywhere.\n\n```\n" + issues.Error() + "\n```\n"}
	for _, is := range issues {
		if is.Pos.File == "" {
			continue
		}
		msg := is.Message
		if is.Hint != "" {
			msg += "\nhint: " + is.Hint
		}
		res.Annotations = append(res.Annotations, checkrun.Annotation{Path: is.Pos.File, Line: is.Pos.Line, Level: "failure", Message: msg, Title: "fleetbot"})
	}
	return res
}

// worst returns the more severe of two conclusions.
func worst(a, b string) string {
	rank := map[string]int{checkrun.ConclusionSuccess: 0, checkrun.ConclusionNeutral: 1, checkrun.ConclusionCancelled: 2, checkrun.ConclusionFailure: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
