package app

import (
	"context"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetbot-io/fleetbot/internal/status"
)

type (
	// StatusView is the fleet at a glance: one row per target repo, a summary, groups;
	// written as text or JSON, and Failed and Blocked say how the command ends.
	StatusView = status.Fleet
	// StatusGrouper groups the rows of a status view (by kind, or by one label).
	StatusGrouper = status.Grouper
	// StatusSelector is a Kubernetes label selector on the clusters' and workspaces'
	// labels; nil selects every row.
	StatusSelector = labels.Selector
	// StatusRun is an apply in progress, as the status pages show it (Reports.Run).
	StatusRun = status.Run
	// StatusRunRepo is one target repo an apply in progress plans.
	StatusRunRepo = status.RunRepo
)

// ParseStatusGroupBy reads a --group-by value: "kind" or "label:KEY".
func ParseStatusGroupBy(s string) (StatusGrouper, error) { return status.ParseGroupBy(s) }

// ParseStatusSelector reads a --selector value ("env=prod,region in (eu,us)"); "" is nil.
func ParseStatusSelector(s string) (StatusSelector, error) { return status.ParseSelector(s) }

// StatusOptions say what Runner.Status shows.
type StatusOptions struct {
	// Only reads and shows only these target repos (names); nil: every repo.
	Only []string
	// Selector and Blocked filter the rows; GroupBy groups the summary (default by kind).
	Selector StatusSelector
	Blocked  bool
	GroupBy  StatusGrouper
	// RepoURL links a repo ("owner/name") to its web page; nil for none.
	RepoURL func(fullName string) string
	// Now is the time the view is shown at (pull request ages).
	Now time.Time
	// Step, when set, is told how far the plan is (Request.Step).
	Step func(phase string, done, total int)
}

// Status plans every target repo of f (read-only; the cost of a no-op plan: Run's plan,
// full) and builds the fleet at a glance from the plan.
func (r *Runner) Status(ctx context.Context, f *Fleet, o StatusOptions) (*StatusView, error) {
	rep, err := r.Run(ctx, f, Request{Mode: ModePlan, Trigger: TriggerCLI, Scope: Scope{Repos: o.Only}, Step: o.Step})
	if err != nil {
		return nil, err
	}
	in := status.Input{Control: f.Repo, Source: rep.Source, Now: o.Now, RepoURL: o.RepoURL, Rollout: rep.Rollout}
	for _, r := range rep.Results {
		in.Entries = append(in.Entries, status.Entry{Result: r, Source: rep.Source, At: o.Now})
	}
	return status.Build(in, status.Options{GroupBy: o.GroupBy}).Filtered(status.Filter{Selector: o.Selector, Blocked: o.Blocked}), nil
}

// StatusFiles renders a status view as the /status pages, as files for a directory
// (fleetbot status --html DIR): index.html and one page per repo, keyed by slash-separated path;
// refresh > 0 makes each page reload itself that often.
func StatusFiles(v *StatusView, refresh time.Duration) (map[string][]byte, error) {
	return status.RenderStatic(v, status.StaticOptions{Refresh: refresh})
}

// StatusPagesConfig configures the /status pages of a service.
type StatusPagesConfig struct {
	// Token is the bearer token every request must carry; empty needs InsecureNoAuth (an
	// authenticating proxy guards the pages).
	Token          []byte
	InsecureNoAuth bool
	GroupBy        StatusGrouper
	// RepoURL links a repo ("owner/name") to its web page.
	RepoURL func(fullName string) string
	// Reports returns what the service knows from its own applies; it is called once per
	// page view and must not call the forge.
	Reports func() Reports
	// Run, when set, returns the apply in progress (nil when none runs); like Reports, it must
	// not call the forge.
	Run func() *StatusRun
}

// StatusPages serves GET /status and GET /status/repo/{name} from a service's retained
// reports: showing them costs no GitHub request.
func StatusPages(c StatusPagesConfig) (http.Handler, error) {
	return status.NewHandler(status.HandlerConfig{
		Token: c.Token, InsecureNoAuth: c.InsecureNoAuth, GroupBy: c.GroupBy,
		Input: func() status.Input {
			in := status.Input{RepoURL: c.RepoURL}
			reps := c.Reports()
			in.Control, in.Source, in.Run = reps.Control, reps.Source, reps.Run
			for _, r := range reps.Repos {
				in.Entries = append(in.Entries, status.Entry{Result: r.Result, Source: r.Source, At: r.At, Applied: true})
			}
			if c.Run != nil {
				in.Run = c.Run()
			}
			return in
		},
	})
}
