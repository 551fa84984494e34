package main

import (
	"flag"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/status"
)

// The widths the status pages are checked at: a desktop browser and a phone.
const (
	wideWidth   = 1400
	narrowWidth = 420
)

// measureScript is the test's instrument, added to a copy of a page only: it records the
// page's document width and viewport width on the harness around it, so --dump-dom shows
// whether anything overflows sideways. The pages themselves carry no script (their
// Content-Security-Policy would refuse one, so the copy drops it).
const measureScript = `<script>parent.document.body.setAttribute("data-scroll-width", document.documentElement.scrollWidth);` +
	`parent.document.body.setAttribute("data-inner-width", window.innerWidth);</script>`

var cspMeta = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy"[^>]*>`)

// harness is a page showing page in an iframe width px wide: headless chromium's windows are at
// least 500 px wide, an iframe is the viewport a phone's would be (its media queries see
// width px). srcdoc gives the frame the harness's origin, so the frame's script may write on
// the harness.
func harness(page string, width int) string {
	inner := cspMeta.ReplaceAllString(page, "")
	inner = strings.Replace(inner, "</body>", measureScript+"</body>", 1)
	return `<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style></head><body>` +
		`<iframe width="` + strconv.Itoa(width) + `" height="900" srcdoc="` + html.EscapeString(inner) + `"></iframe></body></html>`
}

// pageWidths loads a page in headless chromium in a viewport width px wide and returns the
// page's document width, its viewport width, and its DOM.
func pageWidths(t *testing.T, bin, page string, width int) (scroll, inner int, dom string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "harness.html")
	require.NoError(t, os.WriteFile(file, []byte(harness(page, width)), 0o644))
	dump := browse(t, bin, "file://"+file, "--dump-dom", "--window-size="+strconv.Itoa(max(width, 500)+40)+",1000")
	m := regexp.MustCompile(`data-scroll-width="(\d+)" data-inner-width="(\d+)"`).FindStringSubmatch(dump)
	require.NotNil(t, m, "the measurement is on the harness: %s", dump[:min(len(dump), 300)])
	scroll, _ = strconv.Atoi(m[1])
	inner, _ = strconv.Atoi(m[2])
	// The frame's DOM is not in the dump; the page's own is, loaded at the width of the window.
	return scroll, inner, dump
}

// keepsArtifacts reports whether go test keeps the tests' artifacts (-artifacts).
func keepsArtifacts() bool {
	f := flag.Lookup("test.artifacts")
	return f != nil && f.Value.String() == "true"
}

// checkFits loads a page at the wide and the narrow width: nothing overflows sideways, and with
// go test -artifacts a screenshot of each is kept (a chromium run each, skipped otherwise: the
// screenshot asserts nothing). It returns the page's DOM as chromium builds it.
func checkFits(t *testing.T, bin, name, page string) string {
	t.Helper()
	for _, w := range []int{wideWidth, narrowWidth} {
		scroll, inner, _ := pageWidths(t, bin, page, w)
		assert.Equal(t, w, inner, "%s: the viewport is %d px", name, w)
		assert.LessOrEqual(t, scroll, inner, "%s at %d px: the document is %d px wide, wider than the viewport", name, w, scroll)
		if !keepsArtifacts() {
			continue
		}
		file := filepath.Join(t.TempDir(), "harness.html")
		require.NoError(t, os.WriteFile(file, []byte(harness(page, w)), 0o644))
		browse(t, bin, "file://"+file, "--screenshot="+filepath.Join(t.ArtifactDir(), name+"-"+strconv.Itoa(w)+".png"),
			"--window-size="+strconv.Itoa(max(w, 500))+",900", "--hide-scrollbars")
	}
	file := filepath.Join(t.TempDir(), name+".html")
	require.NoError(t, os.WriteFile(file, []byte(page), 0o644))
	return browse(t, bin, "file://"+file, "--dump-dom", "--window-size="+strconv.Itoa(wideWidth)+",900")
}

// TestStatusHTMLInChromium: status --html on the local forge (no GitHub, no service), for a
// fleet where Flux fails one cluster, loaded in headless chromium at 1,400 px and 420 px: the
// failing cluster comes first with a red badge, the failing Kustomization, Flux's message and
// its link; its page lists them; and neither page overflows sideways at either width.
func TestStatusHTMLInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	path := filepath.Join(t.TempDir(), "forge")
	forge := "local:" + path
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, errOut)
	// prod-eu-1's PR is merged by hand; Flux applies it and reports metallb failing.
	gitIn(t, t.TempDir(), "--git-dir", filepath.Join(path, "acme", "cluster-prod-eu-1.git"), "update-ref", "refs/heads/main", "refs/heads/fleetbot/sync")
	head := gitIn(t, t.TempDir(), "--git-dir", filepath.Join(path, "acme", "cluster-prod-eu-1.git"), "rev-parse", "main")
	lf, err := local.Open(path, local.Options{})
	require.NoError(t, err)
	require.NoError(t, lf.SetStatus("acme", "cluster-prod-eu-1", head, "kustomization/flux-system/0c1d2e3f", pr.StatusSuccess))
	require.NoError(t, lf.PostStatus("acme", "cluster-prod-eu-1", head, pr.CommitStatus{Context: "kustomization/platform-metallb/0c1d2e3f",
		State: pr.StatusFailure, TargetURL: "https://grafana.example.com/d/flux?var-name=platform-metallb",
		Description: `IPAddressPool/metallb-system/pool dry-run failed: no matches for kind "IPAddressPool" in version "metallb.io/v1beta1"`}))
	require.NoError(t, lf.Close())

	dir := filepath.Join(t.TempDir(), "pages")
	code, out, errOut := cli(t, "status", "--control", exampleControl, "--forge", forge, "--html", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "6 repos: 1 unhealthy, 5 pr-open")
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	dom := checkFits(t, bin, "status-html", string(index))
	{
		rows := regexp.MustCompile(`<tr data-repo="([^"]+)" data-state="([^"]+)"`).FindAllStringSubmatch(dom, -1)
		require.Len(t, rows, 6)
		assert.Equal(t, []string{"acme/cluster-prod-eu-1", "unhealthy"}, rows[0][1:], "the health failure is first")
		assert.Contains(t, dom, `<span class="state seg-halted" title="halted">unhealthy</span>`, "a failure badge")
		assert.Contains(t, dom, `Flux failure: Kustomization/platform-metallb: IPAddressPool/metallb-system/pool dry-run failed: no matches for kind "IPAddressPool"`)
		assert.Contains(t, dom, `<a class="flux-link" href="https://grafana.example.com/d/flux?var-name=platform-metallb">Flux ↗</a>`)
	}
	detail, err := os.ReadFile(filepath.Join(dir, "repo", "cluster-prod-eu-1.html"))
	require.NoError(t, err)
	dom = checkFits(t, bin, "status-html-repo", string(detail))
	assert.Contains(t, dom, "<b>Kustomization/platform-metallb</b>")
	assert.Contains(t, dom, `<dt>Flux health</dt><dd class="h-failure">failure</dd>`)
}

// TestStatusPageRunInChromium: while serve's first apply runs, /status says "applied n of N"
// and lists every planned repo (not "0 repos ... No target repo matches"), at 1,400 px and
// 420 px without overflowing; the bars keep their width at 420 px.
func TestStatusPageRunInChromium(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	// The instrument can fail: a page wider than the viewport is measured so.
	scroll, inner, _ := pageWidths(t, bin, `<!doctype html><html><body><div style="width:1000px">wide</div></body></html>`, narrowWidth)
	assert.Equal(t, narrowWidth, inner)
	assert.Greater(t, scroll, inner, "a 1000 px page overflows a 420 px viewport")

	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const rev = "0123456789abcdef0123456789abcdef01234567"
	ctl := &control.Repo{}
	in := status.Input{Source: rev, Now: now, Control: ctl, Run: &status.Run{Source: rev, Started: now.Add(-time.Minute)}}
	for i := range 40 {
		name := "prod-europe-west-" + strconv.Itoa(i)
		c := &control.Cluster{}
		c.Metadata.Name, c.Metadata.Labels = name, map[string]string{"env": "prod", "region": "europe-west", "network": "metal"}
		ctl.Clusters = append(ctl.Clusters, c)
		in.Run.Repos = append(in.Run.Repos, status.RunRepo{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name})
		if i < 12 {
			in.Entries = append(in.Entries, status.Entry{Result: reconcile.Result{Repo: "acme/cluster-" + name, Kind: fanout.KindCluster, Name: name,
				Action: pr.ActionCreate, PR: 1, Observed: &pr.Observed{}}, Source: rev, At: now, Applied: true})
		}
	}
	h, err := status.NewHandler(status.HandlerConfig{Input: func() status.Input { return in }, InsecureNoAuth: true,
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	dom := checkFits(t, bin, "status-run", rec.Body.String())
	{
		assert.Contains(t, dom, `<section class="card run" id="run" data-total="40" data-applied="12">`)
		assert.Contains(t, dom, "Applying <code>0123456</code>: 12 of 40 repos applied")
		assert.Contains(t, dom, "applying 0123456: 12 of 40 repos applied; 40 repos: 28 pending, 12 pr-open")
		assert.NotContains(t, dom, "No target repo matches")
		assert.Equal(t, 40, strings.Count(dom, `<tr data-repo="`), "every planned repo has a row")
	}
}
