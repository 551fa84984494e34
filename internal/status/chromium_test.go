package status

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/browsertest"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// bigRun is the first apply of a 40-cluster fleet in progress, 12 applied.
func bigRun(phase string, planned int) Input {
	ctl := &control.Repo{}
	in := Input{Source: source, Now: now, Control: ctl, Run: &Run{Source: source, Started: now.Add(-time.Minute), Phase: phase, Planned: planned}}
	for i := range 40 {
		name := "prod-europe-west-" + strconv.Itoa(i)
		c := &control.Cluster{}
		c.Metadata.Name, c.Metadata.Labels = name, map[string]string{"env": "prod", "region": "europe-west", "network": "metal"}
		ctl.Clusters = append(ctl.Clusters, c)
		in.Run.Repos = append(in.Run.Repos, RunRepo{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name})
		if i < 12 && phase == reconcile.PhaseApply {
			in.Entries = append(in.Entries, Entry{Result: reconcile.Result{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name,
				Action: pr.ActionCreate, PR: 1, Observed: &pr.Observed{}}, Source: source, At: now, Applied: true})
		}
	}
	return in
}

// TestRunPageInChromium: while serve's first apply runs, /status says how far it is — still
// reading and planning ("25 of 40 repos read and planned, 0 applied"), then applying ("applied
// 12 of 40") — and lists every planned repo (not "0 repos ... No target repo matches"), at
// 1,400 px and 420 px in headless Chromium without overflowing.
func TestRunPageInChromium(t *testing.T) {
	t.Parallel()
	bin := browsertest.Chromium(t)
	for _, tc := range []struct {
		phase   string
		planned int
		section string
		says    []string
	}{
		{reconcile.PhasePlan, 25, `<section class="card run" id="run" data-total="40" data-applied="0" data-phase="plan" data-planned="25">`,
			[]string{"Applying <code>0123456</code>: 25 of 40 repos read and planned, 0 applied",
				"applying 0123456: 25 of 40 repos read and planned, 0 applied; 40 repos: 40 pending"}},
		{reconcile.PhaseApply, 40, `<section class="card run" id="run" data-total="40" data-applied="12">`,
			[]string{"Applying <code>0123456</code>: 12 of 40 repos applied",
				"applying 0123456: 12 of 40 repos applied; 40 repos: 28 pending, 12 pr-open"}},
	} {
		in := bigRun(tc.phase, tc.planned)
		h := newTestHandler(t, func() Input { return in }, HandlerConfig{InsecureNoAuth: true, Now: func() time.Time { return now }})
		code, page, _ := get(t, h, "/status", "")
		require.Equal(t, http.StatusOK, code)
		dom := browsertest.Fits(t, bin, "status-run-"+tc.phase, page)
		assert.Contains(t, dom, tc.section, tc.phase)
		for _, s := range tc.says {
			assert.Contains(t, dom, s, tc.phase)
		}
		assert.NotContains(t, dom, "No target repo matches", tc.phase)
		assert.Equal(t, 40, strings.Count(dom, `<tr data-repo="`), "%s: every planned repo has a row", tc.phase)
	}
}

// TestPageBeforeTheFirstApply: before serve's first apply has planned anything, the page says
// so, not "No target repo matches"; once there is a fleet, a filter matching nothing says that.
func TestPageBeforeTheFirstApply(t *testing.T) {
	t.Parallel()
	h := newTestHandler(t, func() Input { return Input{Now: now} }, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "No apply has run yet: fleetbot reads and renders the control repo")
	assert.NotContains(t, body, "No target repo matches")

	h = newTestHandler(t, func() Input { return bigRun(reconcile.PhaseApply, 40) }, HandlerConfig{InsecureNoAuth: true})
	_, body, _ = get(t, h, "/status?q=nothing-matches-this", "")
	assert.Contains(t, body, "No target repo matches.")
}
