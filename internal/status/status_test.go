package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

const source = "0123456789abcdef0123456789abcdef01234567"

func cluster(name string, lbls map[string]string) *control.Cluster {
	c := &control.Cluster{}
	c.Metadata.Name, c.Metadata.Labels = name, lbls
	return c
}

// fleetInput is a small fleet in every state a plan reports.
func fleetInput() Input {
	ctl := &control.Repo{Clusters: []*control.Cluster{
		cluster("a", map[string]string{"env": "prod"}), cluster("b", map[string]string{"env": "prod"}),
		cluster("c", map[string]string{"env": "dev"}), cluster("d", map[string]string{"env": "dev"}),
		cluster("e", map[string]string{"env": "prod"}), cluster("f", nil),
	}}
	res := func(name string, a pr.Action, obs *pr.Observed) reconcile.Result {
		kind := fanout.KindCluster
		repo := "cluster-" + name
		if name == "ws" {
			kind, repo = fanout.KindWorkspace, "workspace-ws"
		}
		return reconcile.Result{Repo: "acme/" + repo, Kind: kind, Name: name, Action: a, Observed: obs}
	}
	opened := now.Add(-50 * time.Hour)
	entries := []reconcile.Result{
		// in sync, Flux healthy
		res("a", pr.ActionNoop, &pr.Observed{Base: "b1", BaseStatus: pr.StatusSuccess, Merged: "feedface"}),
		// open PR waiting on review, while Flux fails what the default branch carries
		res("b", pr.ActionNoop, &pr.Observed{BaseStatus: pr.StatusFailure, BaseFailing: []pr.CommitStatus{{Context: "kustomization/platform-metallb/0c1d",
			State: pr.StatusFailure, Description: "IPAddressPool/metallb-system/pool dry-run failed: no matches for kind\nmore", TargetURL: "https://flux.example/metallb"}},
			PR: &pr.ObservedPR{Number: 7, URL: "https://github.example/acme/cluster-b/pull/7",
				Source: source, Opened: opened, Review: pr.ReviewRequired, Checks: pr.StatusSuccess}}),
		// open PR with failing checks
		res("c", pr.ActionNoop, &pr.Observed{PR: &pr.ObservedPR{Number: 3, Opened: now.Add(-2 * time.Hour), Review: pr.ReviewApproved, Checks: pr.StatusFailure}}),
		// blocked by a human commit
		{Repo: "acme/cluster-d", Kind: fanout.KindCluster, Name: "d", Action: pr.ActionBlocked, PR: 4,
			Reason:   "commit 1234567 on fleetbot/sync was not made by fleetbot: PR #4 is left alone",
			Observed: &pr.Observed{PR: &pr.ObservedPR{Number: 4}}},
		// pending update, with access drift
		{Repo: "acme/cluster-e", Kind: fanout.KindCluster, Name: "e", Action: pr.ActionOpen, FilesChanged: 2,
			Access: &reconcile.AccessReport{Drift: []string{"grant team x push", "revoke y"}}, Observed: &pr.Observed{}},
		// failed
		{Repo: "acme/cluster-f", Kind: fanout.KindCluster, Name: "f", Err: errors.New("reading acme/cluster-f: 502 bad gateway")},
		// deferred workspace
		{Repo: "acme/workspace-ws", Kind: fanout.KindWorkspace, Name: "ws", Action: pr.ActionOpen,
			Err: fmt.Errorf("x: %w", pr.ErrDeferred)},
		// the control repo: access only, not a row
		{Repo: "acme/control", Kind: reconcile.KindControl, Name: "control", Action: pr.ActionNoop},
	}
	in := Input{Control: ctl, Source: source, Now: now, RepoURL: func(n string) string { return "https://github.example/" + n }}
	for _, r := range entries {
		in.Entries = append(in.Entries, Entry{Result: r, Source: source, At: now.Add(-time.Minute)})
	}
	return in
}

func TestBuildRowsPerState(t *testing.T) {
	f := Build(fleetInput(), Options{})
	require.Len(t, f.Repos, 7, "one row per cluster and workspace repo; the control repo is not a row")
	byName := map[string]Repo{}
	for _, r := range f.Repos {
		byName[r.Name] = r
	}
	a := byName["a"]
	assert.Equal(t, StateInSync, a.State)
	assert.Equal(t, "success", a.Health)
	assert.Equal(t, "feedface", a.Merged)
	assert.Equal(t, map[string]string{"env": "prod"}, a.Labels)
	assert.Equal(t, "https://github.example/acme/cluster-a", a.URL)

	assert.Equal(t, SegHealthy, a.Segment)

	// Flux's failure comes first: the badge says unhealthy (halted, red), whatever the pull
	// request does, with the failing Kustomization, its message and link.
	b := byName["b"]
	assert.Equal(t, StateUnhealthy, b.State)
	assert.Equal(t, SegHalted, b.Segment)
	require.NotNil(t, b.PR)
	assert.Equal(t, 7, b.PR.Number)
	assert.Equal(t, "2d", b.PR.Age(), "opened 50h before now")
	assert.Equal(t, WaitReview, b.WaitingOn)
	assert.Equal(t, "failure", b.Health)
	assert.Equal(t, []report.HealthCheck{{Context: "kustomization/platform-metallb/0c1d", Object: "Kustomization/platform-metallb", State: "failure",
		Description: "IPAddressPool/metallb-system/pool dry-run failed: no matches for kind\nmore", URL: "https://flux.example/metallb"}}, b.Failing)
	assert.Equal(t, "Flux failure: Kustomization/platform-metallb: IPAddressPool/metallb-system/pool dry-run failed: no matches for kind; PR #7 open 2d, waiting on review", b.Summary)

	assert.Equal(t, WaitChecks, byName["c"].WaitingOn, "approved but its checks fail")
	assert.Equal(t, "2h", byName["c"].PR.Age())

	d := byName["d"]
	assert.Equal(t, StateBlocked, d.State)
	assert.Equal(t, WaitHumanEdit, d.WaitingOn)
	assert.Contains(t, d.Summary, "not made by fleetbot")

	e := byName["e"]
	assert.Equal(t, StatePending, e.State)
	assert.Equal(t, WaitApply, e.WaitingOn)
	assert.Equal(t, []string{"access (2)"}, e.Drift)
	assert.Equal(t, "fleetbot would open a PR (+0 ~2 -0 files); drift: access (2)", e.Summary)

	assert.Equal(t, StateFailed, byName["f"].State)
	assert.Contains(t, byName["f"].Error, "502")
	assert.Equal(t, "unknown", byName["f"].Health, "no commit status known")

	ws := byName["ws"]
	assert.Equal(t, StateDeferred, ws.State)
	assert.Equal(t, WaitBudget, ws.WaitingOn)
	assert.Equal(t, "workspace", ws.Kind)

	assert.True(t, f.Blocked())
	assert.Equal(t, 7, f.Summary.Total)
	assert.Equal(t, map[State]int{StateUnhealthy: 1, StateInSync: 1, StatePROpen: 1, StateBlocked: 1, StatePending: 1, StateFailed: 1, StateDeferred: 1}, f.Summary.States)
	assert.Equal(t, "7 repos: 1 unhealthy, 1 failed, 1 blocked, 1 deferred, 1 pending, 1 pr-open (waiting on 1 checks), 1 in-sync; Flux health: 1 failure, 1 success, 5 unknown", f.Summary.Line)
}

func TestBuildAppliedResults(t *testing.T) {
	// An apply's results: the PR it opened is open now, carrying the applied revision.
	in := Input{Source: source, Now: now, Entries: []Entry{
		{Result: reconcile.Result{Repo: "acme/cluster-a", Kind: fanout.KindCluster, Name: "a", Action: pr.ActionOpen, PR: 9, PRURL: "https://x/pull/9",
			Observed: &pr.Observed{}}, Source: source, At: now.Add(-3 * time.Hour), Applied: true},
		{Result: reconcile.Result{Repo: "acme/cluster-b", Kind: fanout.KindCluster, Name: "b", Action: pr.ActionClose, PR: 2,
			Observed: &pr.Observed{PR: &pr.ObservedPR{Number: 2}}}, Source: source, At: now, Applied: true},
		{Result: reconcile.Result{Repo: "acme/cluster-c", Kind: fanout.KindCluster, Name: "c", Action: pr.ActionNoop, PR: 5,
			Observed: &pr.Observed{PR: &pr.ObservedPR{Number: 5, Opened: now.Add(-time.Hour)}}}, Source: source, At: now, Applied: true},
	}}
	f := Build(in, Options{})
	a := f.Find("cluster-a")
	require.NotNil(t, a)
	assert.Equal(t, StatePROpen, a.State)
	require.NotNil(t, a.PR)
	assert.Equal(t, 9, a.PR.Number)
	assert.Equal(t, source, a.PR.Source)
	assert.Equal(t, "3h", a.PR.Age(), "opened by that apply")
	b := f.Find("acme/cluster-b")
	assert.Equal(t, StateInSync, b.State, "the apply closed a PR the default branch no longer needed")
	assert.Nil(t, b.PR)
	c := f.Find("cluster-c")
	assert.Equal(t, StatePROpen, c.State, "an apply that found the PR carrying the desired tree left it open")
	assert.Equal(t, WaitReview, c.WaitingOn)
}

func TestGroupsAndFilters(t *testing.T) {
	g, err := ParseGroupBy("label:env")
	require.NoError(t, err)
	f := Build(fleetInput(), Options{GroupBy: g})
	var names []string
	for _, gr := range f.Groups {
		names = append(names, fmt.Sprintf("%s %d/%d", gr.Name, gr.Done, gr.Total))
	}
	assert.Equal(t, []string{"env unset 0/2", "env=dev 0/2", "env=prod 1/3"}, names)
	assert.Equal(t, "label env", f.GroupBy)

	kinds := Build(fleetInput(), Options{})
	assert.Equal(t, "cluster", kinds.Groups[0].Name)
	assert.Equal(t, "workspace", kinds.Groups[1].Name)

	sel, err := ParseSelector("env=prod")
	require.NoError(t, err)
	prod := f.Filtered(Filter{Selector: sel})
	assert.Len(t, prod.Repos, 3)
	assert.Equal(t, 3, prod.Summary.Total, "the summary counts the selected rows")
	assert.False(t, prod.Blocked(), "cluster-d (blocked) is a dev cluster")

	blocked := f.Filtered(Filter{Blocked: true})
	require.Len(t, blocked.Repos, 1)
	assert.Equal(t, "acme/cluster-d", blocked.Repos[0].Repo)

	one := f.Filtered(Filter{Repos: []string{"CLUSTER-B"}})
	require.Len(t, one.Repos, 1)
	assert.Equal(t, []string{"cluster-zz"}, f.UnknownRepos(Filter{Repos: []string{"cluster-b", "cluster-zz"}}))

	_, err = ParseSelector("env in (prod")
	assert.ErrorContains(t, err, "Kubernetes label selector")
	_, err = ParseGroupBy("waves")
	assert.ErrorContains(t, err, "want kind, wave or label:KEY")
	_, err = ParseGroupBy("label:bad key!")
	assert.Error(t, err)
}

func TestJSONIsVersioned(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Build(fleetInput(), Options{}).WriteJSON(&buf))
	var top map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &top))
	assert.EqualValues(t, report.FormatVersion, top["format_version"])
	assert.Equal(t, "status", top["command"])
	assert.Equal(t, source, top["source"])
	repos := top["repos"].([]any)
	require.Len(t, repos, 7, "the report's repos: one per row")
	doc := top["status"].(map[string]any)
	assert.NotContains(t, doc, "repos", "each repo once, in one shape: the view's rows are the entries' status")
	assert.Contains(t, doc, "summary")
	assert.Contains(t, doc, "groups")
	b := repos[1].(map[string]any)
	assert.Equal(t, "acme/cluster-b", b["repo"])
	assert.Equal(t, "noop", b["action"])
	st := b["status"].(map[string]any)
	assert.Equal(t, "unhealthy", st["state"])
	assert.Equal(t, "halted", st["segment"])
	assert.Equal(t, "review", st["waitingOn"])
	assert.EqualValues(t, 50*3600, st["pr"].(map[string]any)["ageSeconds"])
	assert.Equal(t, "Kustomization/platform-metallb", st["failing"].([]any)[0].(map[string]any)["object"])
	d, err := report.Decode(buf.Bytes())
	require.NoError(t, err, "the report reads it back")
	assert.Equal(t, "unhealthy", d.Repos[1].Status.State)
}

func TestText(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Build(fleetInput(), Options{}).WriteText(&buf))
	out := buf.String()
	assert.Contains(t, out, "fleetbot status of control revision 0123456")
	assert.Regexp(t, `REPO\s+KIND\s+LABELS\s+STATE\s+REVISION\s+PR\s+AGE\s+WAITING ON\s+MERGED\s+HEALTH\s+DRIFT`, out, "every field of a row")
	assert.Regexp(t, `acme/cluster-b\s+cluster\s+env=prod\s+unhealthy\s+0123456\s+#7\s+2d\s+review\s+-\s+failure\s+-`, out)
	assert.Regexp(t, `acme/cluster-a\s+cluster\s+env=prod\s+in-sync\s+0123456\s+-\s+-\s+-\s+feedfac\s+success`, out)
	assert.Regexp(t, `acme/cluster-e\s+.*\s+pending\s+.*\s+apply\s+.*access \(2\)`, out)
	assert.Contains(t, out, "\n  acme/cluster-d: blocked: commit 1234567")
	assert.Contains(t, out, "Needs attention:\n  acme/cluster-b: Flux failure: Kustomization/platform-metallb: IPAddressPool/metallb-system/pool dry-run failed")
	assert.True(t, strings.HasSuffix(out, "\n7 repos: 1 unhealthy, 1 failed, 1 blocked, 1 deferred, 1 pending, 1 pr-open (waiting on 1 checks), 1 in-sync; Flux health: 1 failure, 1 success, 5 unknown\n"), "the summary ends it")
}

func newTestHandler(t testing.TB, in func() Input, cfg HandlerConfig) http.Handler {
	t.Helper()
	cfg.Input = in
	h, err := NewHandler(cfg)
	require.NoError(t, err)
	return h
}

func get(t testing.TB, h http.Handler, path, token string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b), rec.Header()
}

func TestHandlerNeedsAToken(t *testing.T) {
	_, err := NewHandler(HandlerConfig{Input: fleetInput})
	assert.ErrorContains(t, err, "--status-token-file", "no token and no explicit insecure mode: refuse to start")

	h := newTestHandler(t, fleetInput, HandlerConfig{Token: []byte("s3cret-token")})
	for _, tok := range []string{"", "wrong", "s3cret-toke", "s3cret-token2"} {
		code, body, hd := get(t, h, "/status", tok)
		assert.Equal(t, http.StatusUnauthorized, code, "token %q", tok)
		assert.Contains(t, hd.Get("WWW-Authenticate"), "Bearer")
		assert.NotContains(t, body, "cluster-a", "nothing of the fleet leaks without the token")
	}
	code, body, hd := get(t, h, "/status", "s3cret-token")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "acme/cluster-a")
	assert.Contains(t, hd.Get("Content-Security-Policy"), "default-src 'none'")
	code, _, _ = get(t, h, "/status/repo/cluster-a", "wrong")
	assert.Equal(t, http.StatusUnauthorized, code, "the detail pages too")

	open := newTestHandler(t, fleetInput, HandlerConfig{InsecureNoAuth: true})
	code, _, _ = get(t, open, "/status", "")
	assert.Equal(t, http.StatusOK, code, "--status-insecure-no-auth: left to the proxy in front")
}

func TestPageShowsFleet(t *testing.T) {
	h := newTestHandler(t, fleetInput, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `id="summary">7 repos: 1 unhealthy, 1 failed, 1 blocked`)
	assert.Contains(t, body, `<a href="https://github.example/acme/cluster-b/pull/7">#7</a>`, "links to the PR")
	assert.Contains(t, body, `href="https://github.example/acme/cluster-a"`, "links to the repo")
	assert.Contains(t, body, `href="/status/repo/cluster-d"`, "links to the detail page")
	assert.Contains(t, body, `<div class="bar" data-group="cluster">`)
	assert.Contains(t, body, `<rect class="w-healthy"`, "group bars are drawn in the colours of the wave bars")
	assert.Contains(t, body, "1/6 in sync")
	assert.Contains(t, body, `id="legend">`, "the bars' colours are explained")
	assert.Contains(t, body, `<meta http-equiv="refresh" content="60">`, "the page reloads itself, filters kept")
	for _, col := range []string{"repo", "kind", "group", "state", "revision", "pr", "age", "waiting", "merged", "health"} {
		assert.Contains(t, body, `sort=`+col, "column %s is sortable", col)
	}
	assert.Regexp(t, `data-repo="acme/cluster-b"[\s\S]*?<code title="[^"]*">0123456</code>`, body, "the rendered revision of each row")

	// filtered by state and selector, sorted
	_, body, _ = get(t, h, "/status?state=blocked", "")
	assert.Contains(t, body, `data-repo="acme/cluster-d"`)
	assert.NotContains(t, body, `data-repo="acme/cluster-a"`)
	_, body, _ = get(t, h, "/status?selector=env%3Ddev&sort=repo&desc=1", "")
	assert.Less(t, strings.Index(body, `data-repo="acme/cluster-d"`), strings.Index(body, `data-repo="acme/cluster-c"`), "sorted by repo, descending")
	assert.NotContains(t, body, `data-repo="acme/cluster-a"`)
	code, body, _ = get(t, h, "/status?selector=env+in+(", "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, `id="error">selector`)

	// hostile input is escaped, never markup
	_, body, _ = get(t, h, "/status?q=%3Cscript%3Ealert(1)%3C/script%3E", "")
	assert.NotContains(t, body, "<script>alert(1)")
	assert.Contains(t, body, "&lt;script&gt;")
}

func TestDetailPage(t *testing.T) {
	in := func() Input {
		i := fleetInput()
		i.Entries[4].Files = []pr.FileChange{{Path: "platform/metallb.yaml", Op: pr.FileChanged}}
		i.Entries[4].Objects = map[string]pr.ObjectCounts{"ConfigMap": {Changed: 1}}
		return i
	}
	h := newTestHandler(t, in, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status/repo/cluster-e", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "<code>platform/metallb.yaml</code>")
	assert.Contains(t, body, "<td>ConfigMap</td>")
	assert.Contains(t, body, "<li>grant team x push</li>")
	assert.Contains(t, body, "fleetbot would open a PR")
	code, _, _ = get(t, h, "/status/repo/nope", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _, _ = get(t, h, "/status/repo/..%2f..%2fetc", "")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestPagination(t *testing.T) {
	in := bigInput(450)
	h := newTestHandler(t, func() Input { return in }, HandlerConfig{InsecureNoAuth: true, PageSize: 200})
	_, body, _ := get(t, h, "/status?sort=repo", "")
	assert.Equal(t, 200, strings.Count(body, "<tr data-repo="))
	assert.Contains(t, body, "rows 1–200 of 450 · page 1 of 3")
	assert.Contains(t, body, `href="/status?page=2&amp;sort=repo">next`)
	_, body, _ = get(t, h, "/status?sort=repo&page=3", "")
	assert.Equal(t, 50, strings.Count(body, "<tr data-repo="))
	assert.Contains(t, body, "rows 401–450 of 450 · page 3 of 3")
	_, body, _ = get(t, h, "/status?page=99", "")
	assert.Contains(t, body, "page 3 of 3", "a page past the end shows the last")
}

// bigInput is a fleet of n clusters in mixed states, rolling out in waves (dev, stage, then
// prod), every 50th cluster provisioned by management cluster "hub".
func bigInput(n int) Input {
	plat := &control.Platform{}
	plat.Spec.Owner = "acme"
	for _, env := range []string{"dev", "stage", "prod"} {
		plat.Spec.Rollout.Waves = append(plat.Spec.Rollout.Waves,
			control.Wave{Name: env, ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": env}}})
	}
	plat.Spec.ManagementClusters = []control.ManagementCluster{{Name: "hub"}}
	in := Input{Source: source, Now: now, Control: &control.Repo{Platform: plat}}
	for i := range n {
		name := fmt.Sprintf("c%05d", i)
		cl := cluster(name, map[string]string{"env": []string{"prod", "dev", "stage"}[i%3], "region": "eu"})
		if i%50 == 0 {
			cl.Spec.Provision = &control.Provision{ManagementCluster: "hub", Profile: "metal"}
		}
		in.Control.Clusters = append(in.Control.Clusters, cl)
		r := reconcile.Result{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name, Action: pr.ActionNoop,
			Observed: &pr.Observed{BaseStatus: pr.StatusSuccess, Merged: source}}
		switch i % 10 {
		case 1, 2:
			r.Observed.PR = &pr.ObservedPR{Number: i, URL: "https://github.example/acme/cluster-" + name + "/pull/1", Opened: now.Add(-time.Duration(i) * time.Minute), Source: source}
		case 3:
			r.Action = pr.ActionBlocked
			r.Reason = "commit abc on fleetbot/sync was not made by fleetbot"
		case 4:
			r.Action, r.FilesChanged = pr.ActionUpdate, 3
		}
		in.Entries = append(in.Entries, Entry{Result: r, Source: source, At: now})
	}
	return in
}

// BenchmarkStatusPage10k renders /status of a 10,000-repo fleet server-side (the target is
// under 200 ms a page): the first page, a filtered and sorted one, and one repo's detail page,
// each building the view afresh from the service's results as serve does on every request.
func BenchmarkStatusPage10k(b *testing.B) {
	in := bigInput(10000)
	h := newTestHandler(b, func() Input { return in }, HandlerConfig{InsecureNoAuth: true})
	for _, c := range []struct{ name, path string }{
		{"list", "/status"},
		{"sorted-filtered", "/status?sort=age&desc=1&selector=env%3Dprod"},
		{"detail", "/status/repo/cluster-c05000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, c.path, nil)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", c.path, rec.Code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
		})
	}
}

// TestNoCredentialsShown: a failure whose message carries a URL with credentials shows the
// failure, never the credentials, in text, JSON and both pages.
func TestNoCredentialsShown(t *testing.T) {
	const secret = "ghs_0123456789abcdefSECRET"
	in := func() Input {
		return Input{Source: source, Now: now, Entries: []Entry{{Result: reconcile.Result{
			Repo: "acme/cluster-x", Kind: fanout.KindCluster, Name: "x", Action: pr.ActionUpdate,
			Err: errors.New("pushing to https://x-access-token:" + secret + "@github.example/acme/cluster-x.git: 403"),
		}, Source: source, At: now}}}
	}
	f := Build(in(), Options{})
	var text, js bytes.Buffer
	require.NoError(t, f.WriteText(&text))
	require.NoError(t, f.WriteJSON(&js))
	h := newTestHandler(t, in, HandlerConfig{InsecureNoAuth: true})
	_, list, _ := get(t, h, "/status", "")
	_, detail, _ := get(t, h, "/status/repo/cluster-x", "")
	for name, out := range map[string]string{"text": text.String(), "json": js.String(), "list": list, "detail": detail} {
		assert.NotContains(t, out, secret, name)
		assert.Contains(t, out, "REDACTED@github.example/acme/cluster-x.git: 403", name)
	}
}

// runInput is the first apply of a fleet in progress: four target repos planned, one applied
// so far (its result), none of the others reached yet.
func runInput() Input {
	in := Input{Source: source, Now: now, Control: &control.Repo{Clusters: []*control.Cluster{
		cluster("a", map[string]string{"env": "prod"}), cluster("b", nil), cluster("c", nil)}}}
	in.Run = &Run{Source: source, Started: now.Add(-time.Minute), Repos: []RunRepo{
		{Repo: "acme/cluster-a", Kind: fanout.KindCluster, Name: "a"}, {Repo: "acme/cluster-b", Kind: fanout.KindCluster, Name: "b"},
		{Repo: "acme/cluster-c", Kind: fanout.KindCluster, Name: "c"}, {Repo: "acme/workspace-ws", Kind: fanout.KindWorkspace, Name: "ws"},
	}}
	in.Entries = []Entry{{Result: reconcile.Result{Repo: "acme/cluster-a", Kind: fanout.KindCluster, Name: "a", Action: pr.ActionCreate, PR: 1,
		Observed: &pr.Observed{}}, Source: source, At: now, Applied: true}}
	return in
}

// TestRunProgress: while an apply runs, every repo it plans has a row (pending: not applied
// yet), and the view says how many it applied: not "0 repos".
func TestRunProgress(t *testing.T) {
	f := Build(runInput(), Options{})
	require.Len(t, f.Repos, 4, "a row per planned repo, applied or not")
	require.NotNil(t, f.Run)
	assert.Equal(t, RunProgress{Source: source, Started: now.Add(-time.Minute), Total: 4, Applied: 1}, *f.Run)
	assert.Equal(t, "applying 0123456: 1 of 4 repos applied; 4 repos: 3 pending, 1 pr-open (waiting on 1 review); Flux health: 4 unknown", f.Summary.Line)
	b := f.Find("cluster-b")
	require.NotNil(t, b)
	assert.Equal(t, StatePending, b.State)
	assert.Equal(t, WaitApply, b.WaitingOn)
	assert.Equal(t, "not applied yet: the apply in progress reaches it", b.Summary)
	assert.Equal(t, SegPending, b.Segment)
	assert.Equal(t, Wave{Name: AllClusters, Total: 3, Open: 1, Pending: 2}, f.Waves[0], "the rollout bar counts them too")

	// An entry of an earlier revision is not this run's.
	in := runInput()
	in.Entries[0].Source = "feedface"
	assert.Equal(t, 0, Build(in, Options{}).Run.Applied)

	h := newTestHandler(t, runInput, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<section class="card run" id="run" data-total="4" data-applied="1">`)
	assert.Contains(t, body, "Applying <code>0123456</code>: 1 of 4 repos applied")
	assert.Contains(t, body, `aria-label="applying 0123456: 1 of 4 repos applied"`)
	assert.NotContains(t, body, "No target repo matches")
	assert.Contains(t, body, `data-repo="acme/cluster-c" data-state="pending"`)

	var buf bytes.Buffer
	require.NoError(t, f.WriteJSON(&buf))
	var doc struct {
		Status struct {
			Run RunProgress `json:"run"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	assert.Equal(t, 1, doc.Status.Run.Applied)
}

// TestRunProgressSaysWhenTheNextStepStarts: an apply in steps waiting for its next step (the
// write budget's next slot) says when it resumes, in the summary line and on the page.
func TestRunProgressSaysWhenTheNextStepStarts(t *testing.T) {
	resume := time.Date(2026, 1, 5, 10, 30, 0, 0, time.UTC)
	input := func() Input {
		in := runInput()
		in.Run.ResumeAt = resume
		return in
	}
	f := Build(input(), Options{})
	require.NotNil(t, f.Run)
	assert.Equal(t, resume, f.Run.ResumeAt)
	assert.True(t, strings.HasPrefix(f.Summary.Line, "applying 0123456: 1 of 4 repos applied; next step at 10:30:00 UTC; "), f.Summary.Line)
	h := newTestHandler(t, input, HandlerConfig{InsecureNoAuth: true})
	code, body, _ := get(t, h, "/status", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "its next step starts at 10:30:00 UTC")
}

// TestFailingShown: a repo Flux fails is first on the page (sorted by state), red, with the
// failing Kustomization and Flux's message in its row, a link to Flux's target URL (an http
// one only), and its page lists every failing object with its message.
func TestFailingShown(t *testing.T) {
	in := func() Input {
		i := fleetInput()
		i.Entries[1].Observed.BaseFailing = append(i.Entries[1].Observed.BaseFailing, pr.CommitStatus{Context: "helmrelease/redis/0c1d",
			State: pr.StatusError, Description: "install retries exhausted", TargetURL: "javascript:alert(1)"})
		return i
	}
	h := newTestHandler(t, in, HandlerConfig{InsecureNoAuth: true})
	_, body, _ := get(t, h, "/status", "")
	rows := strings.Split(body, `<tr data-repo="`)
	require.Greater(t, len(rows), 2)
	assert.True(t, strings.HasPrefix(rows[1], `acme/cluster-b" data-state="unhealthy" data-segment="halted"`), "the health failure is first")
	assert.Contains(t, rows[1], `<span class="state seg-halted" title="halted">unhealthy</span>`)
	assert.Contains(t, rows[1], "Flux failure: Kustomization/platform-metallb: IPAddressPool/metallb-system/pool dry-run failed: no matches for kind (and 1 more)")
	assert.Contains(t, rows[1], `<a class="flux-link" href="https://flux.example/metallb">Flux ↗</a>`)
	assert.NotContains(t, body, "javascript:", "only http(s) links")

	_, detail, _ := get(t, h, "/status/repo/cluster-b", "")
	assert.Contains(t, detail, `<section class="card failing" id="failing">`)
	assert.Contains(t, detail, "<b>Kustomization/platform-metallb</b>")
	assert.Contains(t, detail, "<pre class=\"message\">IPAddressPool/metallb-system/pool dry-run failed: no matches for kind\nmore</pre>")
	assert.Contains(t, detail, `<a href="https://flux.example/metallb">open Flux's link ↗</a>`)
	assert.Contains(t, detail, "<b>HelmRelease/redis</b>")
	assert.Contains(t, detail, "install retries exhausted")
}

// TestStaticPages: RenderStatic writes the same pages as files: every row on one page, most
// urgent first, relative links, no form, no sort links, no script; a repo name that cannot be a
// file name is refused.
func TestStaticPages(t *testing.T) {
	files, err := RenderStatic(Build(fleetInput(), Options{}), StaticOptions{})
	require.NoError(t, err)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	assert.ElementsMatch(t, []string{"index.html", "repo/cluster-a.html", "repo/cluster-b.html", "repo/cluster-c.html", "repo/cluster-d.html",
		"repo/cluster-e.html", "repo/cluster-f.html", "repo/workspace-ws.html"}, names)
	index := string(files["index.html"])
	assert.Less(t, strings.Index(index, `data-repo="acme/cluster-b"`), strings.Index(index, `data-repo="acme/cluster-f"`), "unhealthy first, then failed")
	assert.Contains(t, index, `<a href="repo/cluster-b.html">acme/cluster-b</a>`)
	for _, absent := range []string{`href="/status`, "<form", "<script", `http-equiv="refresh"`, `id="pager"`} {
		assert.NotContains(t, index, absent)
	}
	assert.Contains(t, index, `<meta http-equiv="Content-Security-Policy"`, "the same policy as served, in the page")
	assert.Contains(t, string(files["repo/cluster-b.html"]), `<a href="../index.html">← fleet status</a>`)

	files, err = RenderStatic(Build(fleetInput(), Options{}), StaticOptions{Refresh: 30 * time.Second})
	require.NoError(t, err)
	assert.Contains(t, string(files["index.html"]), `<meta http-equiv="refresh" content="30">`)

	evil := fleetInput()
	evil.Entries[0].Repo = "acme/../../etc/passwd"
	_, err = RenderStatic(Build(evil, Options{}), StaticOptions{})
	assert.ErrorContains(t, err, "cannot name a file")
}
