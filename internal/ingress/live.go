package ingress

import (
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// LiveReports takes what a delivery says of one target repo into the repo's stored report (the
// status pages), with no job and no request: Flux's commit status on its default branch head, a
// push by someone other than fleetbot to its bot branch. webhook.Service implements it. The next
// reconcile of the repo (a drift, the resync) reads the repo afresh: level-triggered recovery
// stays the resync's.
type LiveReports interface {
	ObserveStatus(repo string, st app.LiveStatus) webhook.Observation
	ObserveBotPush(repo string, p app.LivePush) webhook.Observation
}

// observeStatus takes a Flux status delivery into its repo's stored report; it returns whether
// the repo's row shows it now, else why not.
func (b *base) observeStatus(d Delivery, ev *gh.StatusEvent) (bool, string) {
	repo := ev.GetRepo().GetFullName()
	switch {
	case b.cfg.Live == nil:
		return false, "not a cluster repo of a rollout in progress"
	case repo == "" || b.isControl(repo):
		return false, "not a target repo"
	}
	st, err := app.NewLiveStatus(ev.GetSHA(), ev.GetContext(), ev.GetState(), ev.GetDescription(), ev.GetTargetURL())
	if err != nil {
		return false, err.Error()
	}
	obs := b.cfg.Live.ObserveStatus(repo, st)
	if obs != webhook.Observed {
		return false, string(obs)
	}
	b.cfg.Logger.Debug("event observed", "delivery", d.ID, "event", d.Event, "repo", repo, "context", st.Context, "state", st.State, "sha", st.SHA)
	return true, ""
}

// branchPush handles a push to a branch other than the default branch: on a target repo, by
// someone other than fleetbot (the caller checked), to fleetbot's branch of an open pull
// request, it blocks that pull request in the repo's stored report, as the next reconcile will.
func (h *PushHandler) branchPush(d Delivery, ev *gh.PushEvent) (string, error) {
	repo := ev.GetRepo().GetFullName()
	branch, isBranch := strings.CutPrefix(ev.GetRef(), "refs/heads/")
	switch {
	case h.cfg.Live == nil || !isBranch || h.isControl(repo):
		return h.ignore(d, repo, "not the default branch")
	case ev.GetDeleted():
		return h.ignore(d, repo, "branch deleted")
	}
	login := ev.GetSender().GetLogin()
	if login == "" {
		login = ev.GetPusher().GetName()
	}
	p, err := app.NewLivePush(branch, ev.GetAfter(), login)
	if err != nil {
		return h.ignore(d, repo, err.Error())
	}
	if obs := h.cfg.Live.ObserveBotPush(repo, p); obs != webhook.Observed {
		return h.ignore(d, repo, "not the default branch: "+string(obs))
	}
	h.cfg.Logger.Debug("event observed", "delivery", d.ID, "event", d.Event, "repo", repo, "branch", p.Branch, "sha", p.SHA)
	return metrics.OutcomeObserved, nil
}
