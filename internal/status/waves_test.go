package status

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// wavesInput is a fleet rolling out in two declared waves (canary: env=dev, prod: env=prod)
// plus the implicit last wave, with a management cluster "hub" provisioning two clusters:
//
//	canary: c1 in sync + healthy, c2 in sync + Flux failing, c3 PR open
//	prod:   p1 in sync (no Flux verdict), p2 held by the rollout, p3 blocked by a human edit
//	(rest): r1 pending apply (provisioned by hub), r2 PR open (provisioned by hub)
//	empty:  a declared wave matching no cluster
func wavesInput() Input {
	plat := &control.Platform{}
	plat.Spec.Owner = "acme"
	plat.Spec.Rollout.Waves = []control.Wave{
		{Name: "canary", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "dev"}}},
		{Name: "prod", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "prod"}}},
		{Name: "empty", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "nowhere"}}},
	}
	plat.Spec.ManagementClusters = []control.ManagementCluster{{Name: "hub"}, {Name: "idle"}}
	ctl := &control.Repo{Platform: plat}
	for _, c := range []struct{ name, env string }{{"c1", "dev"}, {"c2", "dev"}, {"c3", "dev"}, {"p1", "prod"}, {"p2", "prod"}, {"p3", "prod"}, {"r1", ""}, {"r2", ""}} {
		var lbls map[string]string
		if c.env != "" {
			lbls = map[string]string{"env": c.env}
		}
		cl := cluster(c.name, lbls)
		if c.env == "" {
			cl.Spec.Provision = &control.Provision{ManagementCluster: "hub", Profile: "metal"}
		}
		ctl.Clusters = append(ctl.Clusters, cl)
	}
	res := func(name string, a pr.Action, obs *pr.Observed) reconcile.Result {
		return reconcile.Result{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name, Action: a, Observed: obs}
	}
	openPR := &pr.Observed{PR: &pr.ObservedPR{Number: 1, Opened: now.Add(-time.Hour)}}
	results := []reconcile.Result{
		res("c1", pr.ActionNoop, &pr.Observed{BaseStatus: pr.StatusSuccess}),
		res("c2", pr.ActionNoop, &pr.Observed{BaseStatus: pr.StatusFailure}),
		res("c3", pr.ActionNoop, openPR),
		res("p1", pr.ActionNoop, &pr.Observed{}),
		{Repo: "acme/cluster-p2", Kind: fanout.KindCluster, Name: "p2", Action: pr.ActionOpen,
			Err: fmt.Errorf("wave canary not done: %w", reconcile.ErrHeld)},
		{Repo: "acme/cluster-p3", Kind: fanout.KindCluster, Name: "p3", Action: pr.ActionBlocked, Reason: "a human edit"},
		res("r1", pr.ActionOpen, &pr.Observed{}),
		res("r2", pr.ActionNoop, openPR),
		{Repo: "acme/mgmt-hub", Kind: fanout.KindManagement, Name: "hub", Action: pr.ActionNoop, Observed: openPR},
		{Repo: "acme/mgmt-idle", Kind: fanout.KindManagement, Name: "idle", Action: pr.ActionNoop, Observed: &pr.Observed{}},
	}
	in := Input{Control: ctl, Source: source, Now: now}
	for _, r := range results {
		in.Entries = append(in.Entries, Entry{Result: r, Source: source, At: now})
	}
	return in
}

func waveCounts(ws []Wave) []string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s %s total=%d healthy=%d done=%d open=%d pending=%d halted=%d",
			w.Name, w.State, w.Total, w.Healthy, w.Done, w.Open, w.Pending, w.Halted))
	}
	return out
}

func TestWavesViewModel(t *testing.T) {
	f := Build(wavesInput(), Options{})
	assert.Equal(t, []string{
		"canary  total=3 healthy=1 done=0 open=1 pending=0 halted=1",
		"prod  total=3 healthy=0 done=1 open=0 pending=1 halted=1",
		"empty  total=0 healthy=0 done=0 open=0 pending=0 halted=0",
		"(rest)  total=2 healthy=0 done=0 open=1 pending=1 halted=0",
	}, waveCounts(f.Waves), "declared order, then the clusters no wave matches; a declared wave matching nothing is an empty bar")
	assert.Equal(t, "canary", f.Find("cluster-c1").Wave)
	assert.Equal(t, rollout.RestWave, f.Find("cluster-r1").Wave)
	assert.Empty(t, f.Find("mgmt-hub").Wave, "management repos are in no wave")
	assert.Equal(t, "wave prod: 3 clusters: 0 healthy, 1 done, 0 open, 1 pending, 1 halted", f.Waves[1].Label())

	// With the gate's verdict (fleetbot status plans it), each bar carries its wave's state, and
	// the cluster the rollout halted on is halted whatever its row says.
	in := wavesInput()
	in.Rollout = &rollout.Status{Waves: []rollout.WaveStatus{{Name: "canary", State: rollout.WaveHalted}, {Name: "prod", State: rollout.WaveWaiting}},
		Halted: &rollout.Halt{Wave: "canary", Cluster: "c3", Reason: "timeout"}}
	g := Build(in, Options{})
	assert.Equal(t, "canary halted total=3 healthy=1 done=0 open=0 pending=0 halted=2", waveCounts(g.Waves)[0])
	assert.Equal(t, "prod waiting total=3 healthy=0 done=1 open=0 pending=1 halted=1", waveCounts(g.Waves)[1])
	assert.Contains(t, g.Waves[0].Label(), "; rollout halted")

	// Filtered: counted over the selected rows; a wave left without a row is dropped.
	prod := f.Filtered(Filter{Wave: "prod"})
	assert.Equal(t, []string{"acme/cluster-p1", "acme/cluster-p2", "acme/cluster-p3"}, repoNames(prod.Repos))
	assert.Equal(t, []string{"prod  total=3 healthy=0 done=1 open=0 pending=1 halted=1"}, waveCounts(prod.Waves))
	sel, err := ParseSelector("env=dev")
	require.NoError(t, err)
	assert.Equal(t, []string{"canary  total=3 healthy=1 done=0 open=1 pending=0 halted=1"}, waveCounts(f.Filtered(Filter{Selector: sel}).Waves))

	// Grouped by wave: clusters by wave, the other repos by kind.
	byWave := Build(wavesInput(), Options{GroupBy: mustParseGroup(t, "wave")})
	var names []string
	for _, gr := range byWave.Groups {
		names = append(names, fmt.Sprintf("%s %d", gr.Name, gr.Total))
	}
	assert.Equal(t, []string{"management 2", "wave (rest) 2", "wave canary 3", "wave prod 3"}, names)

	// JSON: the waves and each cluster's wave.
	var buf bytes.Buffer
	require.NoError(t, f.WriteJSON(&buf))
	var doc struct {
		Status struct {
			Waves []Wave `json:"waves"`
		} `json:"status"`
		Repos []report.Repo `json:"repos"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	require.Len(t, doc.Status.Waves, 4)
	assert.Equal(t, Wave{Name: "canary", Total: 3, Healthy: 1, Open: 1, Halted: 1}, doc.Status.Waves[0])
	require.NotNil(t, doc.Repos[0].Status)
	assert.Equal(t, "canary", doc.Repos[0].Status.Wave)

	// Text: a WAVE column, and the rollout per wave.
	buf.Reset()
	require.NoError(t, f.WriteText(&buf))
	out := buf.String()
	assert.Regexp(t, `REPO\s+KIND\s+LABELS\s+WAVE\s+STATE\s+REVISION`, out)
	assert.Regexp(t, `acme/cluster-p2\s+cluster\s+env=prod\s+prod\s+deferred\s`, out)
	assert.Contains(t, out, "\nRollout:\n  wave canary: 3 clusters: 1 healthy, 0 done, 1 open, 0 pending, 1 halted\n")
}

func TestWavesNoneDeclared(t *testing.T) {
	f := Build(fleetInput(), Options{})
	require.Len(t, f.Waves, 1, "no waves declared: one bar for every cluster")
	assert.Equal(t, Wave{Name: AllClusters, Total: 6, Healthy: 1, Open: 1, Pending: 1, Halted: 3}, f.Waves[0],
		"a healthy, c open, b unhealthy, d blocked and f failed halted, e pending; the workspace is in no wave")
	for _, r := range f.Repos {
		assert.Empty(t, r.Wave, "%s: no wave column without waves", r.Repo)
	}
	assert.Equal(t, "all clusters: 6 clusters: 1 healthy, 0 done, 1 open, 1 pending, 3 halted", f.Waves[0].Label())
	assert.Len(t, f.Filtered(Filter{Wave: AllClusters}).Repos, 6, "the one bar's link selects every cluster")
	var buf bytes.Buffer
	require.NoError(t, f.WriteText(&buf))
	assert.Regexp(t, `REPO\s+KIND\s+LABELS\s+STATE\s`, buf.String(), "no WAVE column")

	none := Build(Input{Source: source, Now: now, Entries: fleetInput().Entries}, Options{})
	assert.Empty(t, none.Waves, "no control repo (serve before its first apply): no rollout picture")
	assert.Equal(t, "cluster", Build(fleetInput(), Options{GroupBy: ByWave()}).Groups[0].Name, "without waves, grouping by wave is by kind")
}

// svgDoc is an SVG bar parsed as XML.
type svgDoc struct {
	XMLName   xml.Name  `xml:"svg"`
	Role      string    `xml:"role,attr"`
	AriaLabel string    `xml:"aria-label,attr"`
	ViewBox   string    `xml:"viewBox,attr"`
	Title     string    `xml:"title"`
	Rects     []svgRect `xml:"rect"`
}

type svgRect struct {
	Class string  `xml:"class,attr"`
	X     float64 `xml:"x,attr"`
	Width float64 `xml:"width,attr"`
	Title string  `xml:"title"`
}

func parseSVG(t *testing.T, h template.HTML) svgDoc {
	t.Helper()
	var d svgDoc
	dec := xml.NewDecoder(strings.NewReader(string(h)))
	dec.Strict = true
	require.NoError(t, dec.Decode(&d), "the bar is well-formed XML: %s", h)
	_, err := dec.Token()
	require.ErrorIs(t, err, io.EOF, "nothing after the svg element")
	return d
}

func TestWaveSVG(t *testing.T) {
	w := Wave{Name: "prod", State: "active", Total: 7, Healthy: 3, Done: 0, Open: 2, Pending: 1, Halted: 1}
	d := parseSVG(t, waveSVG(&w))
	assert.Equal(t, "img", d.Role)
	assert.Equal(t, "0 0 100 10", d.ViewBox)
	want := "wave prod: 7 clusters: 3 healthy, 0 done, 2 open, 1 pending, 1 halted; rollout active"
	assert.Equal(t, want, d.AriaLabel, "the accessible name carries every count")
	assert.Equal(t, want, d.Title)
	require.Len(t, d.Rects, 4, "one rect per non-empty segment")
	x := 0.0
	for i, c := range []struct {
		class string
		n     int
	}{{"w-healthy", 3}, {"w-open", 2}, {"w-pending", 1}, {"w-halted", 1}} {
		r := d.Rects[i]
		assert.Equal(t, c.class, r.Class, "segment %d", i)
		assert.InDelta(t, 100*float64(c.n)/7, r.Width, 0.001, "%s: its share of the bar", c.class)
		assert.InDelta(t, x, r.X, 0.002, "%s starts where the previous one ends", c.class)
		assert.Equal(t, fmt.Sprintf("%d %s", c.n, strings.TrimPrefix(c.class, "w-")), r.Title)
		x += r.Width
	}
	assert.InDelta(t, 100, x, 0.01, "the segments fill the bar")

	// An empty wave is an empty bar, still labelled.
	d = parseSVG(t, waveSVG(&Wave{Name: "empty"}))
	assert.Empty(t, d.Rects)
	assert.Equal(t, "wave empty: 0 clusters: 0 healthy, 0 done, 0 open, 0 pending, 0 halted", d.AriaLabel)

	// A hostile wave name stays text.
	evil := `"><script>alert(1)</script>&`
	d = parseSVG(t, waveSVG(&Wave{Name: evil, Total: 1, Pending: 1}))
	assert.Equal(t, "wave "+evil+": 1 cluster: 0 healthy, 0 done, 0 open, 1 pending, 0 halted", d.AriaLabel)
	assert.NotContains(t, string(waveSVG(&Wave{Name: evil})), "<script>")

	// Group bars are drawn the same way, with the same segments and classes: a colour means
	// one thing across the page.
	f := Build(fleetInput(), Options{})
	gd := parseSVG(t, f.Groups[0].SVG())
	assert.Equal(t, "cluster: 1 of 6 in sync", gd.AriaLabel)
	var classes []string
	sum := 0.0
	for _, r := range gd.Rects {
		classes = append(classes, r.Class)
		sum += r.Width
	}
	assert.Equal(t, []string{"w-healthy", "w-open", "w-pending", "w-halted"}, classes)
	assert.InDelta(t, 100, sum, 0.01)
	assert.InDelta(t, 300.0/6, gd.Rects[3].Width, 0.001, "3 of 6 halted: unhealthy, blocked, failed")
}

func TestPageShowsWaves(t *testing.T) {
	h := newTestHandler(t, wavesInput, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<section class="progress" id="rollout">`)
	assert.Contains(t, body, "<h2>Rollout by wave</h2>")
	var waves []string
	for _, m := range regexp.MustCompile(`<div class="bar wave" data-wave="([^"]+)" data-total="(\d+)"`).FindAllStringSubmatch(body, -1) {
		waves = append(waves, m[1]+"="+m[2])
	}
	assert.Equal(t, []string{"canary=3", "prod=3", "empty=0", "(rest)=2"}, waves, "a bar per wave, in rollout order")
	// The SVG inside the page is the one BarSVG draws, escaped once.
	m := regexp.MustCompile(`data-wave="canary"[\s\S]*?(<svg[\s\S]*?</svg>)`).FindStringSubmatch(body)
	require.NotNil(t, m)
	d := parseSVG(t, template.HTML(m[1]))
	assert.Equal(t, "wave canary: 3 clusters: 1 healthy, 0 done, 1 open, 0 pending, 1 halted", d.AriaLabel)
	assert.Len(t, d.Rects, 3)
	assert.Contains(t, body, `id="wave-legend"`, "the segments are explained")
	assert.Regexp(t, `data-wave="canary"[^>]*>[\s\S]*?</svg>\s*<span>1/3 in sync</span>`, body, "healthy + done, in words beside the bar")
	assert.Contains(t, body, `<a href="/status?sort=state&amp;wave=prod">wave prod</a>`, "a wave's bar links to its clusters")

	_, body, _ = get(t, h, "/status?wave=prod", "")
	rows := regexp.MustCompile(`<tr data-repo="([^"]+)"`).FindAllStringSubmatch(body, -1)
	var names []string
	for _, r := range rows {
		names = append(names, r[1])
	}
	assert.ElementsMatch(t, []string{"acme/cluster-p1", "acme/cluster-p2", "acme/cluster-p3"}, names)
	assert.Contains(t, body, `<option value="prod" selected>prod</option>`, "the wave filter is kept in the form")

	// A wave that does not exist is an error on the page, escaped, not an empty table.
	code, body, _ = get(t, h, "/status?wave=%3Cb%3Enope", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `id="error">unknown wave &#34;&lt;b&gt;nope&#34; (the waves: canary, prod, empty, (rest))`)

	// No waves declared: one "all clusters" bar under a heading that says so.
	plain := newTestHandler(t, fleetInput, HandlerConfig{InsecureNoAuth: true})
	_, body, _ = get(t, plain, "/status", "")
	assert.Contains(t, body, "Rollout: no waves declared, a change reaches every cluster at once")
	assert.Equal(t, 1, strings.Count(body, `<div class="bar wave"`))
	assert.Contains(t, body, `data-wave="all clusters" data-total="6"`)
	assert.Contains(t, body, `<option value="all clusters">all clusters</option>`, "the wave filter offers the one bar")
}

func TestManagementRepos(t *testing.T) {
	f := Build(wavesInput(), Options{})
	hub := f.Find("mgmt-hub")
	require.NotNil(t, hub, "a management repo is a row")
	assert.Equal(t, "management", hub.Kind)
	assert.Equal(t, []string{"r1", "r2"}, hub.Provisions, "the provisioned clusters it holds")
	assert.Equal(t, StatePROpen, hub.State)
	idle := f.Find("acme/mgmt-idle")
	require.NotNil(t, idle)
	assert.Empty(t, idle.Provisions)
	assert.Equal(t, StateInSync, idle.State)
	assert.Equal(t, "acme/mgmt-hub", f.Find("cluster-r1").ProvisionedBy)
	assert.Empty(t, f.Find("cluster-c1").ProvisionedBy)
	assert.Equal(t, 3, f.Summary.States[StateInSync], "c1, p1 and mgmt-idle are in sync")
	assert.Equal(t, 1, f.Summary.States[StateUnhealthy], "c2 carries the desired state, and Flux fails it")
	kinds := map[string]int{}
	for _, g := range f.Groups {
		kinds[g.Name] = g.Total
	}
	assert.Equal(t, map[string]int{"cluster": 8, "management": 2}, kinds)

	// Filters: by repo, by state, by text (a provisioned cluster's name finds its management
	// repo), and a label selector (management repos carry no labels).
	assert.Equal(t, []string{"acme/mgmt-hub"}, repoNames(f.Filtered(Filter{Repos: []string{"MGMT-HUB"}}).Repos))
	assert.Equal(t, []string{"acme/cluster-c3", "acme/cluster-r2", "acme/mgmt-hub"}, repoNames(f.Filtered(Filter{States: []State{StatePROpen}}).Repos))
	assert.Equal(t, []string{"acme/cluster-r2", "acme/mgmt-hub"}, repoNames(f.Filtered(Filter{Text: "r2"}).Repos))
	sel, err := ParseSelector("env=prod")
	require.NoError(t, err)
	assert.NotContains(t, repoNames(f.Filtered(Filter{Selector: sel}).Repos), "acme/mgmt-hub")
	assert.Equal(t, []string{"acme/mgmt-hub", "acme/mgmt-idle"}, repoNames(f.Filtered(Filter{Group: "management"}).Repos))

	// JSON and text.
	var buf bytes.Buffer
	require.NoError(t, f.WriteJSON(&buf))
	var doc struct {
		Repos []report.Repo `json:"repos"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	var found bool
	for _, r := range doc.Repos {
		if r.Repo == "acme/mgmt-hub" {
			found = true
			assert.Equal(t, "management", r.Kind)
			assert.Equal(t, []string{"r1", "r2"}, r.Status.Provisions)
		}
		if r.Repo == "acme/cluster-r2" {
			assert.Equal(t, "acme/mgmt-hub", r.Status.ProvisionedBy)
		}
	}
	assert.True(t, found, "the management repo is in the report's repos, with its status")
	assert.Len(t, doc.Repos, 10)
	buf.Reset()
	require.NoError(t, f.WriteText(&buf))
	out := buf.String()
	assert.Regexp(t, `acme/mgmt-hub\s+management\s+-\s+-\s+pr-open\s`, out)
	assert.Contains(t, out, "\nProvisioned clusters by management repo:\n  acme/mgmt-hub: r1, r2\n  acme/mgmt-idle: no cluster\n")

	// Pages: the row names its clusters, the detail page lists them; a provisioned cluster
	// links to its management repo.
	h := newTestHandler(t, wavesInput, HandlerConfig{InsecureNoAuth: true})
	_, body, _ := get(t, h, "/status?group=management", "")
	assert.Regexp(t, `data-repo="acme/mgmt-hub"[\s\S]*?<td data-label="kind">management</td>[\s\S]*?provisions 2: r1, r2`, body)
	_, body, _ = get(t, h, "/status/repo/mgmt-hub", "")
	assert.Contains(t, body, `<dd id="provisions">r1, r2</dd>`)
	_, body, _ = get(t, h, "/status/repo/cluster-r1", "")
	assert.Contains(t, body, `<dt>provisioned by</dt><dd><a href="/status/repo/mgmt-hub">acme/mgmt-hub</a></dd>`)
	assert.Contains(t, body, `<dt>rollout wave</dt><dd>(rest)</dd>`)
}

func TestFewNamesAtMostFive(t *testing.T) {
	var names []string
	for i := range 12 {
		names = append(names, "c"+strconv.Itoa(i))
	}
	assert.Equal(t, "c0, c1, c2, c3, c4 and 7 more", few(names))
	assert.Equal(t, "c0, c1", few(names[:2]))
}

func repoNames(rs []Repo) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Repo)
	}
	return out
}

func mustParseGroup(t *testing.T, s string) Grouper {
	t.Helper()
	g, err := ParseGroupBy(s)
	require.NoError(t, err)
	return g
}

// TestWavesOfALimitedPlan: fleetbot status --repo plans only some repos; a wave none of whose
// clusters was planned is no bar (it would read "0 clusters"), an empty declared wave still is.
func TestWavesOfALimitedPlan(t *testing.T) {
	in := wavesInput()
	var kept []Entry
	for _, e := range in.Entries {
		if e.Name == "p1" || e.Name == "hub" {
			kept = append(kept, e)
		}
	}
	in.Entries = kept
	f := Build(in, Options{})
	assert.Equal(t, []string{
		"prod  total=1 healthy=0 done=1 open=0 pending=0 halted=0",
		"empty  total=0 healthy=0 done=0 open=0 pending=0 halted=0",
	}, waveCounts(f.Waves))
	in.Control.Platform.Spec.Rollout.Waves = nil
	in.Entries = kept[1:]
	assert.Empty(t, Build(in, Options{}).Waves, "only a management repo planned: no cluster, no bar")
}

// TestStatusShowsNextWindow: with change windows declared, status says in text, JSON and on
// the page whether they are open and when that changes.
func TestStatusShowsNextWindow(t *testing.T) {
	t.Parallel()
	in := wavesInput()
	// now is Tuesday 2026-11-24 12:00 UTC: a window opening on Wednesdays at 09:00 is closed.
	in.Control.Platform.Spec.Rollout.Windows = []control.ChangeWindow{{Kind: control.WindowAllow, Days: []string{"Wed"}, Start: "09:00", Duration: "8h"}}
	f := Build(in, Options{})
	require.NotNil(t, f.Window)
	assert.Equal(t, report.RolloutWindow{Open: false, Next: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}, *f.Window)

	var text bytes.Buffer
	require.NoError(t, f.WriteText(&text))
	assert.Contains(t, text.String(), "\nChange windows: closed until 2026-11-25T09:00:00Z (no new pull request opens and nothing merges; open ones are still updated)\n")
	var js bytes.Buffer
	require.NoError(t, f.WriteJSON(&js))
	assert.Contains(t, js.String(), `"window": {`)
	assert.Contains(t, js.String(), `"next": "2026-11-25T09:00:00Z"`)
	files, err := RenderStatic(f, StaticOptions{})
	require.NoError(t, err)
	assert.Contains(t, string(files["index.html"]), `id="window" data-open="false">change windows: closed until 2026-11-25T09:00:00Z`)

	in.Control.Platform.Spec.Rollout.Windows = nil
	assert.Nil(t, Build(in, Options{}).Window, "no windows: nothing to show")
}
