package app

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// What a webhook delivery says of one target repo, taken straight into a service's last result
// of that repo (its status page row) without a reconcile: Flux's commit status on the default
// branch head, a human's push to the bot branch. The next reconcile of the repo reads it afresh
// (level-triggered): these only make the page right in the meantime.

// Bounds of what a delivery's status may carry onto the status pages. GitHub caps a status's
// description at 140 characters and Flux's notification-controller cuts its message to fit;
// a longer one is cut here, never shown whole.
const (
	maxLiveContext     = 256
	maxLiveDescription = 1024
	maxLiveURL         = 2048
	maxLiveLogin       = 64
)

// LiveStatus is a commit status a delivery carried (GitHub's status event): Flux's verdict on
// one Kustomization or HelmRelease at a commit, bounded (NewLiveStatus).
type LiveStatus struct {
	SHA     string
	Context string
	// State is success, failure or error (a pending status says nothing yet).
	State       string
	Description string
	// TargetURL is the status's link, an http or https URL; "" when it had none, or another.
	TargetURL string
}

// NewLiveStatus checks a status event's fields against what Flux posts and bounds them: sha a
// full commit SHA, context a Flux object's ("kustomization/NAME/..." or "helmrelease/NAME/..."),
// state success, failure or error; the description is cut to 1 KiB of valid UTF-8 and a target
// URL that is not an absolute http(s) URL of at most 2 KiB is dropped. The error says which
// field does not fit (the delivery is then ignored).
func NewLiveStatus(sha, context, state, description, targetURL string) (LiveStatus, error) {
	switch {
	case !isCommitSHA(sha):
		return LiveStatus{}, fmt.Errorf("sha %q is not a full commit SHA", bounded(sha, 64))
	case len(context) > maxLiveContext || !IsFluxStatus(context):
		return LiveStatus{}, fmt.Errorf("context %q is not a Flux Kustomization's or HelmRelease's", bounded(context, 64))
	case state != pr.StatusSuccess && state != pr.StatusFailure && state != pr.StatusError:
		return LiveStatus{}, fmt.Errorf("state %q is not a verdict (success, failure or error)", bounded(state, 16))
	}
	st := LiveStatus{SHA: strings.ToLower(sha), Context: context, State: state, Description: bounded(description, maxLiveDescription)}
	if u, err := url.Parse(targetURL); err == nil && len(targetURL) <= maxLiveURL && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		st.TargetURL = targetURL
	}
	return st, nil
}

// IsFluxStatus reports whether a commit status context is Flux's notification-controller's on
// a Kustomization or a HelmRelease ("kustomization/NAME/UID", "helmrelease/NAME/UID").
func IsFluxStatus(context string) bool { return report.FluxObject(context) != "" }

// CountsAsRolloutHealth reports whether a commit status context is one a rollout's gate
// weighs (a Flux Kustomization's or HelmRelease's: rollout.CountsAsHealth), so that a status
// of it advances the rollout.
func CountsAsRolloutHealth(context string) bool { return rollout.CountsAsHealth(context) }

// LivePush is a push to a target repo's bot branch by someone other than fleetbot.
type LivePush struct {
	// Branch is the branch pushed to; SHA its new head; Login who pushed (bounded).
	Branch, SHA, Login string
}

// NewLivePush bounds a push's fields; the error says which does not fit.
func NewLivePush(branch, sha, login string) (LivePush, error) {
	if !isCommitSHA(sha) {
		return LivePush{}, fmt.Errorf("after %q is not a full commit SHA", bounded(sha, 64))
	}
	return LivePush{Branch: bounded(branch, maxLiveContext), SHA: strings.ToLower(sha), Login: bounded(login, maxLiveLogin)}, nil
}

// ObserveStatus returns res with st taken into its default branch head's health, and whether
// st applies: only a status on the head res observed does (a status on another commit is
// about what the next reconcile reads). The failing statuses keep one entry per context, the
// newest; the combined state is GitHub's (failure over error, pending while one runs), as far
// as the failing statuses tell it: a failure they did not explain (a check run) stays.
func ObserveStatus(res RepoResult, st LiveStatus) (RepoResult, bool) {
	if res.Observed == nil || res.Observed.Base == "" || !strings.EqualFold(res.Observed.Base, st.SHA) {
		return res, false
	}
	obs := *res.Observed // copy on write: readers of the previous result keep theirs
	had := len(obs.BaseFailing) > 0
	failing := make([]pr.CommitStatus, 0, len(obs.BaseFailing)+1)
	for _, f := range obs.BaseFailing {
		if f.Context != st.Context {
			failing = append(failing, f)
		}
	}
	if st.State == pr.StatusFailure || st.State == pr.StatusError {
		failing = append(failing, pr.CommitStatus{Context: st.Context, State: st.State, Description: st.Description, TargetURL: st.TargetURL})
		slices.SortFunc(failing, func(a, b pr.CommitStatus) int { return strings.Compare(a.Context, b.Context) })
	}
	obs.BaseFailing = failing
	obs.BaseStatus = combinedAfter(obs.BaseStatus, had, failing)
	res.Observed = &obs
	return res, true
}

// combinedAfter is the head's combined state once its failing statuses are failing: failure
// when one failed, error when one errored; with none, pending stays pending (another context
// may still run) and a failure no status explained stays, else success.
func combinedAfter(prev string, hadFailing bool, failing []pr.CommitStatus) string {
	for _, f := range failing {
		if f.State == pr.StatusFailure {
			return pr.StatusFailure
		}
	}
	switch {
	case len(failing) > 0:
		return pr.StatusError
	case prev == pr.StatusPending:
		return prev
	case (prev == pr.StatusFailure || prev == pr.StatusError) && !hadFailing:
		return prev
	}
	return pr.StatusSuccess
}

// ObserveBotPush returns res blocked by p, a commit someone else pushed to fleetbot's branch
// of the open pull request res left (what the next reconcile decides too: fleetbot leaves the
// pull request alone), and whether p applies: not when res left no open pull request.
func ObserveBotPush(res RepoResult, p LivePush) (RepoResult, bool) {
	n := openPR(res)
	if n == 0 {
		return res, false
	}
	res.Action, res.PR, res.Err = pr.ActionBlocked, n, nil
	who := p.Login
	if who == "" {
		who = "someone"
	}
	res.Reason = fmt.Sprintf("commit %s on %s was not made by fleetbot (pushed by %s): PR #%d is left alone",
		report.ShortSHA(p.SHA), p.Branch, who, n)
	obs := pr.Observed{}
	if res.Observed != nil {
		obs = *res.Observed
	}
	o := pr.ObservedPR{Number: n, URL: res.PRURL}
	if obs.PR != nil {
		o = *obs.PR
	}
	o.Blocked = true
	obs.PR = &o
	res.Observed = &obs
	return res, true
}

// openPR is the number of the pull request res leaves open; 0 when none.
func openPR(res RepoResult) int {
	switch {
	case res.Action == pr.ActionClose || res.Action == pr.ActionCleanup:
		return 0
	case res.PR > 0:
		return res.PR
	case res.Observed != nil && res.Observed.PR != nil:
		return res.Observed.PR.Number
	}
	return 0
}

// isCommitSHA reports whether s is a full hex commit SHA (SHA-1, or SHA-256 repositories).
func isCommitSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') && (r < 'A' || r > 'F') {
			return false
		}
	}
	return true
}

// bounded cuts s to at most n bytes of valid UTF-8, marking a cut with "…".
func bounded(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
