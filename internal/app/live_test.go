package app

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

const (
	liveHead  = "0123456789abcdef0123456789abcdef01234567"
	liveOther = "89abcdef0123456789abcdef0123456789abcdef"
)

// TestNewLiveStatusBoundsWhatADeliveryCarries: only a Flux verdict on a full commit SHA is
// taken; its description is cut to 1 KiB of valid UTF-8 and a link that is not http(s) is
// dropped, so that nothing a delivery carries reaches the page unbounded.
func TestNewLiveStatusBoundsWhatADeliveryCarries(t *testing.T) {
	t.Parallel()
	st, err := NewLiveStatus(strings.ToUpper(liveHead), "helmrelease/redis/0c1d", "error", "install retries exhausted", "https://flux.example/redis")
	require.NoError(t, err)
	assert.Equal(t, LiveStatus{SHA: liveHead, Context: "helmrelease/redis/0c1d", State: "error", Description: "install retries exhausted",
		TargetURL: "https://flux.example/redis"}, st)

	for _, tc := range []struct{ sha, context, state, want string }{
		{"0123", "kustomization/apps/1", "failure", `sha "0123" is not a full commit SHA`},
		{liveHead, "ci/build", "failure", `context "ci/build" is not a Flux Kustomization's or HelmRelease's`},
		{liveHead, "kustomization/" + strings.Repeat("a", 300), "failure", "is not a Flux Kustomization's or HelmRelease's"},
		{liveHead, "kustomization/apps/1", "pending", `state "pending" is not a verdict (success, failure or error)`},
		{liveHead, "kustomization/apps/1", "<b>", `state "<b>" is not a verdict`},
	} {
		_, err := NewLiveStatus(tc.sha, tc.context, tc.state, "", "")
		assert.ErrorContains(t, err, tc.want, "%+v", tc)
	}

	long := strings.Repeat("é", 2000) // 4,000 bytes
	for _, link := range []string{"javascript:alert(1)", "data:text/html,x", "//flux.example/x", "https://" + strings.Repeat("a", 3000) + ".example"} {
		st, err := NewLiveStatus(liveHead, "kustomization/apps/1", "failure", long, link)
		require.NoError(t, err)
		assert.Empty(t, st.TargetURL, "no link from %.40q", link)
		assert.LessOrEqual(t, len(st.Description), 1024)
		assert.True(t, utf8.ValidString(st.Description))
		assert.True(t, strings.HasSuffix(st.Description, "…"), "a cut is marked")
	}
	p, err := NewLivePush("fleetbot/sync", liveHead, strings.Repeat("x", 500))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(p.Login), 64)
	_, err = NewLivePush("fleetbot/sync", "", "bob")
	assert.ErrorContains(t, err, `after "" is not a full commit SHA`)
}

// liveResult is a cluster repo's last result: an open pull request #3, the default branch at
// liveHead with Flux healthy.
func liveResult() RepoResult {
	return RepoResult{Repo: "acme/cluster-a", Name: "a", Kind: "cluster", Action: pr.ActionNoop, PR: 3,
		Observed: &pr.Observed{Base: liveHead, BaseStatus: pr.StatusSuccess, PR: &pr.ObservedPR{Number: 3, Review: "REVIEW_REQUIRED"}}}
}

// TestObserveStatusOnTheHead: a Flux failure on the default branch head makes it fail with the
// failing object, its message and link; its success clears it; a status on another commit does
// not apply; the result observed before is left as it was (copy on write).
func TestObserveStatusOnTheHead(t *testing.T) {
	t.Parallel()
	before := liveResult()
	fail, err := NewLiveStatus(liveHead, "kustomization/platform-metallb/0c1d", "failure", "IPAddressPool/pool dry-run failed", "https://grafana.example/d/flux")
	require.NoError(t, err)
	res, ok := ObserveStatus(before, fail)
	require.True(t, ok)
	assert.Equal(t, pr.StatusFailure, res.Observed.BaseStatus)
	assert.Equal(t, []pr.CommitStatus{{Context: "kustomization/platform-metallb/0c1d", State: "failure",
		Description: "IPAddressPool/pool dry-run failed", TargetURL: "https://grafana.example/d/flux"}}, res.Observed.BaseFailing)
	assert.Equal(t, pr.StatusSuccess, before.Observed.BaseStatus, "the earlier result is untouched")
	assert.Empty(t, before.Observed.BaseFailing)

	errored, err := NewLiveStatus(liveHead, "helmrelease/redis/0c1d", "error", "install retries exhausted", "")
	require.NoError(t, err)
	res, ok = ObserveStatus(res, errored)
	require.True(t, ok)
	assert.Equal(t, pr.StatusFailure, res.Observed.BaseStatus, "failure over error")
	assert.Len(t, res.Observed.BaseFailing, 2)

	for _, c := range []string{"kustomization/platform-metallb/0c1d", "helmrelease/redis/0c1d"} {
		ok2, err := NewLiveStatus(liveHead, c, "success", "Applied revision: main@sha1:0123", "")
		require.NoError(t, err)
		res, ok = ObserveStatus(res, ok2)
		require.True(t, ok)
	}
	assert.Equal(t, pr.StatusSuccess, res.Observed.BaseStatus, "every failing object recovered")
	assert.Empty(t, res.Observed.BaseFailing)

	other, err := NewLiveStatus(liveOther, "kustomization/apps/1", "failure", "x", "")
	require.NoError(t, err)
	_, ok = ObserveStatus(liveResult(), other)
	assert.False(t, ok, "a status on a commit that is not the observed head")
	noBase := liveResult()
	noBase.Observed = nil
	_, ok = ObserveStatus(noBase, fail)
	assert.False(t, ok, "a repo whose head fleetbot did not observe")

	// A failure no status explained (a failing check run) is not cleared by a status's success;
	// pending stays pending.
	for _, prev := range []string{pr.StatusFailure, pr.StatusPending} {
		r := liveResult()
		r.Observed.BaseStatus = prev
		okst, err := NewLiveStatus(liveHead, "kustomization/apps/1", "success", "", "")
		require.NoError(t, err)
		r, ok = ObserveStatus(r, okst)
		require.True(t, ok)
		assert.Equal(t, prev, r.Observed.BaseStatus)
	}
}

// TestObserveBotPushBlocksTheOpenPullRequest: someone else's commit on fleetbot's branch blocks
// the open pull request, as the next reconcile decides; a result without one is left alone.
func TestObserveBotPushBlocksTheOpenPullRequest(t *testing.T) {
	t.Parallel()
	p, err := NewLivePush("fleetbot/sync", liveOther, "bob")
	require.NoError(t, err)
	before := liveResult()
	res, ok := ObserveBotPush(before, p)
	require.True(t, ok)
	assert.Equal(t, pr.ActionBlocked, res.Action)
	assert.Equal(t, "commit 89abcde on fleetbot/sync was not made by fleetbot (pushed by bob): PR #3 is left alone", res.Reason)
	assert.Equal(t, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonHumanCommitOnBranch}, res.Outcome())
	assert.True(t, res.Observed.PR.Blocked)
	assert.Equal(t, "REVIEW_REQUIRED", res.Observed.PR.Review, "what was observed of the pull request stays")
	assert.False(t, before.Observed.PR.Blocked, "the earlier result is untouched")

	closed := liveResult()
	closed.Action, closed.Observed.PR = pr.ActionClose, nil
	_, ok = ObserveBotPush(closed, p)
	assert.False(t, ok, "no open pull request")
	none := liveResult()
	none.PR, none.Observed.PR = 0, nil
	_, ok = ObserveBotPush(none, p)
	assert.False(t, ok)
}
