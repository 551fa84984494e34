package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/status"
)

// StatusPageRuns is how many times StatusPage requests each page.
const StatusPageRuns = 20

// StatusResult is serve's /status of a generated fleet, rendered server-side.
type StatusResult struct {
	// Clusters of the control repo; Repos the rows of the view (cluster, workspace and
	// management repos); Waves the bars of its rollout picture.
	Clusters, Repos, Waves int
	// PageSize is how many rows a page of the list shows.
	PageSize int
	Pages    []PageTiming
}

// PageTiming is one page requested Runs times.
type PageTiming struct {
	Name, Path string
	Runs       int
	// Median and Max of the server-side time: build the view from the results, filter,
	// sort, render one page of HTML.
	Median, Max time.Duration
	// Bytes is the size of the page's HTML.
	Bytes int
}

// Slowest is the largest median of the pages.
func (r *StatusResult) Slowest() time.Duration {
	var d time.Duration
	for _, p := range r.Pages {
		d = max(d, p.Median)
	}
	return d
}

// StatusPage loads the generated control repo in dir, declares rollout waves (dev, staging,
// prod in eu, the rest) and a management cluster provisioning every 50th cluster on it, gives
// every target repo a result in a mix of states (in sync and healthy, PR open for review,
// blocked by a human edit, pending, held by the rollout, failing in Flux), and requests
// /status pages from status.Handler as serve does on every request: the view is built
// afresh from those results each time. No network: the handler is called in process.
func StatusPage(dir string) (*StatusResult, error) {
	repo, err := control.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	in := statusInput(repo)
	h, err := status.NewHandler(status.HandlerConfig{Input: func() status.Input { return in }, InsecureNoAuth: true,
		Now: func() time.Time { return in.Now }})
	if err != nil {
		return nil, err
	}
	f := status.Build(in, status.Options{})
	res := &StatusResult{Clusters: len(repo.Clusters), Repos: len(f.Repos), Waves: len(f.Waves), PageSize: status.DefaultPageSize}
	last := f.Repos[len(f.Repos)/2].Short()
	for _, p := range []struct{ name, path string }{
		{"first page (sorted by state)", "/status"},
		{"filtered by selector and sorted by PR age", "/status?sort=age&desc=1&selector=env%3Dprod"},
		{"one wave, text search", "/status?wave=prod-eu&q=eu"},
		{"one repo's detail page", "/status/repo/" + last},
	} {
		t := PageTiming{Name: p.name, Path: p.path, Runs: StatusPageRuns}
		times := make([]time.Duration, 0, t.Runs)
		for range t.Runs {
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
			times = append(times, time.Since(start))
			if rec.Code != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %d: %s", p.path, rec.Code, rec.Body.String())
			}
			t.Bytes = rec.Body.Len()
		}
		slices.Sort(times)
		t.Median, t.Max = times[len(times)/2], times[len(times)-1]
		res.Pages = append(res.Pages, t)
	}
	return res, nil
}

// statusInput declares waves and a management cluster on repo and makes up one result per
// target repo, in a fixed mix of states.
func statusInput(repo *control.Repo) status.Input {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const source = "0123456789abcdef0123456789abcdef01234567"
	sel := func(kv ...string) *control.Selector {
		s := &control.Selector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	spec := &repo.Platform.Spec
	spec.Rollout.Waves = []control.Wave{
		{Name: "dev", ClusterSelector: sel("env", "dev")},
		{Name: "staging", ClusterSelector: sel("env", "staging")},
		{Name: "prod-eu", ClusterSelector: sel("env", "prod", "region", "eu")},
	}
	spec.ManagementClusters = append(spec.ManagementClusters, control.ManagementCluster{Name: "hub"})
	owner := spec.Owner
	fl := repo.Fleet()
	in := status.Input{Control: repo, Source: source, Now: now,
		RepoURL: func(full string) string { return "https://github.example/" + full }}
	add := func(r reconcile.Result) {
		in.Entries = append(in.Entries, status.Entry{Result: r, Source: source, At: now.Add(-time.Minute), Applied: true})
	}
	for i, c := range repo.Clusters {
		if i%50 == 0 {
			c.Spec.Provision = &control.Provision{ManagementCluster: "hub", Profile: "metal"}
		}
		name := c.Metadata.Name
		full := owner + "/" + strings.ReplaceAll(fl.ClusterRepo, "{name}", name)
		r := reconcile.Result{Repo: full, Kind: fanout.KindCluster, Name: name, Action: pr.ActionNoop,
			Observed: &pr.Observed{BaseStatus: pr.StatusSuccess, Merged: source}}
		switch i % 10 {
		case 1, 2:
			r.Observed.PR = &pr.ObservedPR{Number: i, URL: "https://github.example/" + full + "/pull/1",
				Opened: now.Add(-time.Duration(i) * time.Minute), Source: source, Review: pr.ReviewRequired}
		case 3:
			r.Action, r.PR = pr.ActionBlocked, 1
			r.Reason = "commit abc on fleetbot/sync was not made by fleetbot"
		case 4:
			r.Action, r.FilesChanged = pr.ActionOpen, 3
			r.Err = fmt.Errorf("wave dev not done: %w", reconcile.ErrHeld)
		case 5:
			r.Observed.BaseStatus = pr.StatusFailure
		}
		add(r)
	}
	for _, w := range repo.Workspaces {
		name := w.Metadata.Name
		add(reconcile.Result{Repo: owner + "/" + strings.ReplaceAll(fl.WorkspaceRepo, "{name}", name), Kind: fanout.KindWorkspace,
			Name: name, Action: pr.ActionNoop, Observed: &pr.Observed{}})
	}
	add(reconcile.Result{Repo: owner + "/" + repo.ManagementRepo("hub"), Kind: fanout.KindManagement, Name: "hub",
		Action: pr.ActionNoop, Observed: &pr.Observed{}})
	return in
}
