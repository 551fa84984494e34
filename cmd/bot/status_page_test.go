package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/browsertest"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// keepsArtifacts reports whether go test keeps the tests' artifacts (-artifacts).
func keepsArtifacts() bool {
	f := flag.Lookup("test.artifacts")
	return f != nil && f.Value.String() == "true"
}

// checkFits loads a page at the wide and the narrow width in one chromium run: nothing
// overflows sideways; with go test -artifacts a screenshot at each width is kept (a chromium run
// each, skipped otherwise: the screenshot asserts nothing). It returns the page's DOM as
// chromium builds it at the wide width.
func checkFits(t *testing.T, bin, name, page string) string {
	t.Helper()
	dom := browsertest.Fits(t, bin, name, page)
	if keepsArtifacts() {
		for _, w := range []int{browsertest.Wide, browsertest.Narrow} {
			file := filepath.Join(t.TempDir(), name+".html")
			require.NoError(t, os.WriteFile(file, []byte(page), 0o644))
			browsertest.Browse(t, bin, "file://"+file, "--screenshot="+filepath.Join(t.ArtifactDir(), name+"-"+strconv.Itoa(w)+".png"),
				"--window-size="+strconv.Itoa(max(w, 500))+",900", "--hide-scrollbars")
		}
	}
	return dom
}

// TestStatusHTMLInChromium: status --html on the local forge (no GitHub, no service), for a
// fleet where Flux fails one cluster, loaded in headless chromium at 1,400 px and 420 px: the
// failing cluster comes first with a red badge, the failing Kustomization, Flux's message and
// its link; its page lists them; and neither page overflows sideways at either width.
func TestStatusHTMLInChromium(t *testing.T) {
	t.Parallel()
	bin := browsertest.Chromium(t)
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
