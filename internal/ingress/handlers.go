package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// HandlerConfig is what the event handlers share.
type HandlerConfig struct {
	// Control is the control repo, "owner/name".
	Control string
	// Self is fleetbot's own login ("<app-slug>[bot]"): events it caused are
	// ignored (it already knows), events of other bots are not.
	Self string
	// AppID is fleetbot's GitHub App id: only its own check runs are re-run.
	AppID int64
	// TenantChecks queues a tenant check for every pull request opened, synchronized or
	// reopened outside the control repo, and for a re-run of fleetbot's check run there
	// (serve --tenant-check); the service checks those of workspace and cluster repos.
	TenantChecks bool
	// Queue receives the jobs (the service's queue, webhook.NewQueue).
	Queue Queue
	// Rollout, when set, names the cluster and workspace repos of the rollout in progress: a Flux commit
	// status or a closed pull request there queues a full apply, which advances the rollout.
	Rollout *webhook.RolloutWatch
	// Live, when set, takes a Flux commit status on a target repo and a push by someone else
	// to its bot branch into the repo's stored report (the status pages), with no job and no
	// request (see LiveReports).
	Live LiveReports
	// Logger receives one line per queued or ignored event; nil discards.
	Logger *slog.Logger
}

// Queue takes the jobs the handlers decide on.
type Queue interface {
	// Push queues j, or merges it into a waiting job and reports coalesced; a full queue
	// refuses it with jobqueue.ErrFull, which the dispatcher answers 503.
	Push(j webhook.Job) (coalesced bool, err error)
}

// Handlers returns one handler per event family: push, pull_request,
// check_run, installation (with installation_repositories), the drift
// events of target repos (repository, member, team, branch_protection_rule),
// repository_ruleset (a repo's ruleset or fleetbot's org ruleset) and status (Flux's commit statuses on the cluster and workspace repos of a rollout).
func Handlers(cfg HandlerConfig) []Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &base{cfg: cfg}
	return []Handler{&PushHandler{b}, &PullRequestHandler{b}, &CheckRunHandler{b}, &InstallationHandler{b}, &DriftHandler{b}, &RulesetHandler{b}, &StatusHandler{b}}
}

// base holds what every handler needs and the decisions they share.
type base struct{ cfg HandlerConfig }

func (b *base) isControl(fullName string) bool { return strings.EqualFold(fullName, b.cfg.Control) }

func (b *base) isSelf(u *gh.User) bool {
	return u != nil && b.cfg.Self != "" && strings.EqualFold(u.GetLogin(), b.cfg.Self)
}

// queue pushes j for delivery d and returns the outcome.
func (b *base) queue(d Delivery, j webhook.Job) (string, error) {
	j.Delivery, j.Queued = d.ID, d.Received
	if j.Queued.IsZero() {
		j.Queued = time.Now()
	}
	coalesced, err := b.cfg.Queue.Push(j)
	if err != nil {
		return "", err
	}
	outcome := metrics.OutcomeQueued
	if coalesced {
		outcome = metrics.OutcomeCoalesced
	}
	b.cfg.Logger.Debug("job "+outcome, "delivery", d.ID, "event", d.Event, "repo", j.Repo, "kind", j.Kind, "key", j.Key(), "sha", j.SHA)
	return outcome, nil
}

// ignore says, at info level, why a delivery queued nothing: a signed delivery (the signature
// was verified before any handler runs) whose repo GitHub named, with a reason of our own words.
func (b *base) ignore(d Delivery, repo, why string) (string, error) {
	b.cfg.Logger.Info("event ignored", "delivery", d.ID, "event", d.Event, "repo", repo, "why", why)
	return metrics.OutcomeIgnored, nil
}

// isSHA reports whether s is a full lowercase hex commit SHA, as GitHub names commits in events.
func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

func decode(d Delivery, v any) error {
	if err := json.Unmarshal(d.Payload, v); err != nil {
		return fmt.Errorf("%w: decoding %s event: %v", ErrBadPayload, d.Event, err)
	}
	return nil
}

// PushHandler: a push to the control repo's default branch applies the
// fleet; a push to a target repo's default branch reconciles that repo.
type PushHandler struct{ *base }

// Handles returns "push".
func (h *PushHandler) Handles() []string { return []string{"push"} }

// Handle queues an apply or a drift job.
func (h *PushHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev gh.PushEvent
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	repo := ev.GetRepo().GetFullName()
	switch {
	case h.isSelf(ev.GetSender()):
		return h.ignore(d, repo, "pushed by fleetbot")
	case ev.GetRef() != "refs/heads/"+ev.GetRepo().GetDefaultBranch():
		return h.branchPush(d, &ev)
	case h.isControl(repo):
		if ev.GetDeleted() {
			return h.ignore(d, repo, "default branch deleted")
		}
		return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: repo, SHA: ev.GetAfter(), Reason: "push", Incremental: true})
	default:
		return h.queue(d, webhook.Job{Kind: webhook.KindDrift, Repo: repo, Reason: "push"})
	}
}

// PullRequestHandler: a control-repo pull request opened, synchronized or
// reopened gets a plan check run; any other repo's pull request opened, synchronized or
// reopened, fleetbot's own included, gets a tenant check (the service checks it when the repo
// is a workspace or cluster repo of the fleet, and ignores it otherwise); a target repo's pull
// request closed (merged or not) reconciles that repo, or the whole fleet when the repo is a
// cluster or workspace repo of the rollout in progress (a merge may let the rollout go on).
type PullRequestHandler struct{ *base }

// Handles returns "pull_request".
func (h *PullRequestHandler) Handles() []string { return []string{"pull_request"} }

// Handle queues a check, a tenant, a drift or an apply job.
func (h *PullRequestHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev gh.PullRequestEvent
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	repo, action, pr := ev.GetRepo().GetFullName(), ev.GetAction(), ev.GetPullRequest()
	opened := action == "opened" || action == "synchronize" || action == "reopened"
	switch {
	case opened && h.cfg.TenantChecks && !h.isControl(repo):
		// fleetbot's own pull requests too: the protection requires the check of every head.
		if !isSHA(pr.GetHead().GetSHA()) {
			return h.ignore(d, repo, "pull request without a head commit")
		}
		return h.queue(d, webhook.Job{Kind: webhook.KindTenant, Repo: repo, SHA: pr.GetHead().GetSHA(), PR: ev.GetNumber(), Reason: "pull_request." + action})
	case h.isSelf(ev.GetSender()):
		return h.ignore(d, repo, "caused by fleetbot")
	case h.isControl(repo) && opened:
		return h.queue(d, webhook.Job{Kind: webhook.KindCheck, Repo: repo, SHA: pr.GetHead().GetSHA(), PR: ev.GetNumber(),
			Base: pr.GetBase().GetSHA(), Author: pr.GetUser().GetLogin(), Reason: "pull_request." + action})
	case h.isControl(repo):
		return h.ignore(d, repo, "control pull request "+action)
	case action != "closed":
		return h.ignore(d, repo, "pull request "+action)
	}
	if h.cfg.Rollout.Active(repo) {
		return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: h.cfg.Control, Reason: webhook.ReasonRolloutMerge})
	}
	return h.queue(d, webhook.Job{Kind: webhook.KindDrift, Repo: repo, Reason: "pull_request.closed"})
}

// CheckRunHandler: "Re-run" on one of fleetbot's check runs redoes the check.
type CheckRunHandler struct{ *base }

// Handles returns "check_run".
func (h *CheckRunHandler) Handles() []string { return []string{"check_run"} }

// Handle queues a check job.
func (h *CheckRunHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev gh.CheckRunEvent
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	repo, cr := ev.GetRepo().GetFullName(), ev.GetCheckRun()
	switch {
	case ev.GetAction() != "rerequested":
		return h.ignore(d, repo, "check run "+ev.GetAction())
	case h.cfg.AppID != 0 && cr.GetApp().GetID() != h.cfg.AppID:
		return h.ignore(d, repo, "another app's check run")
	case !h.isControl(repo) && h.cfg.TenantChecks && isSHA(cr.GetHeadSHA()):
		// fleetbot's check runs outside the control repo are tenant checks; a re-run checks
		// that commit (no PR: it coalesces with nothing of a newer head).
		return h.queue(d, webhook.Job{Kind: webhook.KindTenant, Repo: repo, SHA: cr.GetHeadSHA(), Reason: "check_run.rerequested"})
	case !h.isControl(repo):
		return h.ignore(d, repo, "not the control repo")
	}
	j := webhook.Job{Kind: webhook.KindCheck, Repo: repo, SHA: cr.GetHeadSHA(), Reason: "check_run.rerequested"}
	if prs := cr.PullRequests; len(prs) > 0 {
		j.PR, j.Base = prs[0].GetNumber(), prs[0].GetBase().GetSHA()
	}
	return h.queue(d, j)
}

// InstallationHandler: the App installed, its permissions accepted or its
// repositories changed: resync everything.
type InstallationHandler struct{ *base }

// Handles returns "installation" and "installation_repositories".
func (h *InstallationHandler) Handles() []string {
	return []string{"installation", "installation_repositories"}
}

// Handle queues an apply job.
func (h *InstallationHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev struct {
		Action       string `json:"action"`
		Installation struct {
			Account struct {
				Login string `json:"login"`
			} `json:"account"`
		} `json:"installation"`
	}
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	account := ev.Installation.Account.Login
	switch ev.Action {
	case "created", "new_permissions_accepted", "unsuspend", "added", "removed":
		return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: h.cfg.Control, Reason: d.Event + "." + ev.Action})
	}
	return h.ignore(d, account, d.Event+" "+ev.Action)
}

// DriftHandler: a target repo's settings, collaborators, teams or branch
// protection changed: reconcile that repo. A deleted team may have held any
// repo: resync everything.
type DriftHandler struct{ *base }

// Handles returns the repository-level drift events.
func (h *DriftHandler) Handles() []string {
	return []string{"repository", "member", "team", "branch_protection_rule"}
}

// Handle queues a drift (or apply) job.
func (h *DriftHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev struct {
		Action     string         `json:"action"`
		Repository *gh.Repository `json:"repository"`
		Sender     *gh.User       `json:"sender"`
	}
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	repo := ev.Repository.GetFullName()
	switch {
	case h.isSelf(ev.Sender):
		return h.ignore(d, repo, "caused by fleetbot")
	case repo == "" && d.Event == "team" && ev.Action == "deleted":
		return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: h.cfg.Control, Reason: "team.deleted"})
	case repo == "":
		return h.ignore(d, repo, "no repository")
	case h.isControl(repo):
		return h.ignore(d, repo, "the control repo")
	}
	return h.queue(d, webhook.Job{Kind: webhook.KindDrift, Repo: repo, Reason: d.Event + "." + ev.Action, Access: true})
}

// StatusHandler: Flux's notification-controller posted a commit status (a Kustomization's or a
// HelmRelease's) on a target repo: its stored report shows it at once (HandlerConfig.Live); on
// a cluster or workspace repo of the rollout in progress a Kustomization's also applies the fleet, so that
// the rollout gate sees the verdict and the next wave starts (or the rollout halts) now rather
// than at the next resync. Other statuses (CI jobs, pending ones) are ignored.
type StatusHandler struct{ *base }

// Handles returns "status".
func (h *StatusHandler) Handles() []string { return []string{"status"} }

// Handle queues an apply job.
func (h *StatusHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev gh.StatusEvent
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	repo := ev.GetRepo().GetFullName()
	switch {
	case !app.IsFluxStatus(ev.GetContext()):
		return h.ignore(d, repo, "not a Flux Kustomization or HelmRelease status")
	case ev.GetState() == "pending":
		return h.ignore(d, repo, "pending: no verdict yet")
	}
	observed, why := h.observeStatus(d, &ev)
	switch {
	case app.CountsAsRolloutHealth(ev.GetContext()) && h.cfg.Rollout.Active(repo):
		return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: h.cfg.Control, Reason: webhook.ReasonRolloutStatus})
	case observed:
		return metrics.OutcomeObserved, nil
	}
	return h.ignore(d, repo, why)
}
