// Package status is the fleet at a glance: one row per target repo (which control-repo revision
// it carries, what its pull request waits on, how Flux is doing, what drifted), a summary, and a
// progress picture per group and per rollout wave. It is a view model built purely from what
// reconcile already computed — a plan's or an apply's results and the control repo's labels,
// waves and management clusters — so showing it costs
// no request of its own: `fleetbot status` builds it from one plan, and `fleetbot serve` from the
// results of its last applies. Rendered as text, JSON (versioned) and HTML.
package status

import (
	"fmt"
	"html/template"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// State is where one target repo stands.
type State string

// States, from the most to the least urgent (the order of summaries and bars).
const (
	// StateUnhealthy: Flux reports the default branch failing (a failure or error commit
	// status on its head): the cluster does not run what fleetbot merged. Failing names the
	// Kustomization or HelmRelease, its message and link.
	StateUnhealthy State = "unhealthy"
	// StateFailed: the repo could not be read or written; Error says why.
	StateFailed State = "failed"
	// StateBlocked: the repo needs a human (report.ClassNeedsHuman): someone pushed to the bot
	// branch, so fleetbot no longer updates the PR; or GitHub refuses fleetbot a permission.
	StateBlocked State = "blocked"
	// StateDeferred: the repo waits for a later run by itself (report.ClassDeferred): the write
	// budget, a rate limit, the rollout's wave.
	StateDeferred State = "deferred"
	// StatePending: fleetbot's next apply changes the repo (a plan saw it out of date).
	StatePending State = "pending"
	// StatePROpen: the desired state waits in an open pull request.
	StatePROpen State = "pr-open"
	// StateInSync: the default branch carries the desired state.
	StateInSync State = "in-sync"
	// StateSkipped: left alone (archived).
	StateSkipped State = "skipped"
)

// States lists every State in summary order.
var States = []State{StateUnhealthy, StateFailed, StateBlocked, StateDeferred, StatePending, StatePROpen, StateInSync, StateSkipped}

// What an open pull request or a repo waits on (Repo.WaitingOn).
const (
	WaitReview    = "review"
	WaitChecks    = "checks"
	WaitMerge     = "merge"
	WaitHumanEdit = "human edit"
	WaitBudget    = "budget"
	WaitRollout   = "rollout"
	WaitApply     = "apply"
)

// HealthUnknown is the health of a repo whose forge reports no commit status (the local
// forge, or no Flux notification posting one).
const HealthUnknown = "unknown"

// Entry is one repo's latest result and where it came from.
type Entry struct {
	reconcile.Result
	// Source is the control-repo revision the result was planned or applied from.
	Source string
	// At is when the result was computed.
	At time.Time
	// Applied is true for an apply's result (its actions happened), false for a plan's
	// (its actions are pending).
	Applied bool
}

// Input is what a view is built from.
type Input struct {
	// Control is the control repo the results were computed from (labels, owner); may be nil.
	Control *control.Repo
	// Source is the control-repo revision rendered (the newest, in serve).
	Source string
	// Entries are the repos' results, one per repo.
	Entries []Entry
	// RepoURL links a repo ("owner/name") to its web page; nil or "" for none.
	RepoURL func(fullName string) string
	// Now is the time the view is shown at (PR ages).
	Now time.Time
	// Rollout is the rollout gate's verdict for Source when the results come from a plan that
	// evaluated it (fleetbot status); nil otherwise. It adds each wave's state to its bar.
	Rollout *rollout.Status
	// Run is an apply in progress (serve's first apply of a fleet takes minutes): the target
	// repos it plans. A repo without a result yet still has a row (pending: not applied yet),
	// and the view says how many of them the run has applied. Nil when none runs.
	Run *Run
}

// Run is an apply in progress: the revision it applies, when it started and the target repos
// it plans. A repo's entry of that revision from then on is the run's: applied.
type Run struct {
	Source  string
	Started time.Time
	Repos   []RunRepo
	// ResumeAt is when its next step runs (serve's full apply in steps); zero: it runs now.
	ResumeAt time.Time
	// Phase is the phase the run is in (reconcile.PhaseRead, PhasePlan, PhaseApply; "" when
	// not told) and Planned how many of Repos it has read and decided so far: a large fleet's
	// plan takes minutes before the first repo is applied.
	Phase   string
	Planned int
}

// RunRepo is one target repo an apply in progress plans.
type RunRepo struct {
	// Repo is "owner/name"; Kind cluster, workspace or management; Name the cluster,
	// workspace or management cluster.
	Repo string
	Kind fanout.Kind
	Name string
}

// RunProgress is how far an apply in progress is: "applied 120 of 1050".
type RunProgress struct {
	Source  string    `json:"source,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Total is how many target repos the run plans, Applied how many of them it applied.
	Total   int `json:"total"`
	Applied int `json:"applied"`
	// ResumeAt is when the run's next step starts (zero: it runs now).
	ResumeAt time.Time `json:"resumeAt,omitzero"`
	// Phase and Planned are the run's (Run.Phase, Run.Planned), while it reads and plans.
	Phase   string `json:"phase,omitempty"`
	Planned int    `json:"planned,omitempty"`
}

// Line says it in words: "applying 0123456: 120 of 1050 repos applied"; while the run reads
// the owner or plans, it says so first ("applying 0123456: 300 of 1050 repos read and
// planned, 0 applied"); and when the next step starts if the run waits for it ("; next step
// at 09:00:00 UTC").
func (p *RunProgress) Line() string {
	line := "applying " + report.ShortSHA(p.Source) + ": " + p.Doing()
	if !p.ResumeAt.IsZero() {
		line += "; next step at " + p.ResumeAt.UTC().Format("15:04:05 UTC")
	}
	return line
}

// Doing is Line without the revision: "120 of 1050 repos applied".
func (p *RunProgress) Doing() string {
	repos := plural(p.Total, "repo", "repos")
	switch p.Phase {
	case reconcile.PhaseRead:
		return fmt.Sprintf("reading the owner's teams and repos, then %d %s to plan, %d applied", p.Total, repos, p.Applied)
	case reconcile.PhasePlan:
		return fmt.Sprintf("%d of %d %s read and planned, %d applied", min(p.Planned, p.Total), p.Total, repos, p.Applied)
	}
	return fmt.Sprintf("%d of %d %s applied", p.Applied, p.Total, repos)
}

// SVG draws the run's progress as a bar: applied, then not yet.
func (p *RunProgress) SVG() template.HTML {
	return BarSVG(p.Line(), p.Total, []Segment{
		{N: p.Applied, Class: "w-done", Title: fmt.Sprintf("%d applied", p.Applied)},
		{N: p.Total - p.Applied, Class: "w-pending", Title: fmt.Sprintf("%d not applied yet", p.Total-p.Applied)},
	})
}

// Options tune Build.
type Options struct {
	// GroupBy groups rows for the progress picture (default ByKind, or ByWave).
	GroupBy Grouper

	// waves caches the wave assignment across Builds of the same control repo (the pages).
	waves *rollout.ViewCache
}

// Grouper names a grouping and the group of a repo.
type Grouper struct {
	// Name says what the groups are ("kind", "label env", later "wave").
	Name string
	// Of returns the group of one repo.
	Of func(r *Repo) string
}

// ByKind groups repos by kind (cluster, workspace, management).
func ByKind() Grouper {
	return Grouper{Name: "kind", Of: func(r *Repo) string { return r.Kind }}
}

// ByLabel groups repos by the value of one label; repos without it form "<key> unset".
func ByLabel(key string) Grouper {
	return Grouper{Name: "label " + key, Of: func(r *Repo) string {
		if v, ok := r.Labels[key]; ok {
			return key + "=" + v
		}
		return key + " unset"
	}}
}

// ByWave groups cluster repos by rollout wave (platform spec.rollout.waves; RestWave for the
// clusters no wave matches) and every other repo by kind. With no waves declared it is ByKind.
func ByWave() Grouper {
	return Grouper{Name: "wave", Of: func(r *Repo) string {
		if r.Wave != "" {
			return "wave " + r.Wave
		}
		return r.Kind
	}}
}

// ParseGroupBy reads a --group-by value: "kind", "wave" or "label:KEY".
func ParseGroupBy(s string) (Grouper, error) {
	switch {
	case s == "" || s == "kind":
		return ByKind(), nil
	case s == "wave":
		return ByWave(), nil
	case strings.HasPrefix(s, "label:") && len(s) > len("label:"):
		key := strings.TrimPrefix(s, "label:")
		if errs := validLabelKey(key); errs != "" {
			return Grouper{}, fmt.Errorf("group by %q: %s", s, errs)
		}
		return ByLabel(key), nil
	}
	return Grouper{}, fmt.Errorf("group by %q: want kind, wave or label:KEY (for example label:env)", s)
}

func validLabelKey(key string) string {
	if _, err := labels.NewRequirement(key, "exists", nil); err != nil {
		return err.Error()
	}
	return ""
}

// Fleet is the view: a summary, groups and one row per target repo.
type Fleet struct {
	// Source is the control-repo revision rendered.
	Source string `json:"source,omitempty"`
	// GeneratedAt is when the view was built.
	GeneratedAt time.Time `json:"generatedAt"`
	Summary     Summary   `json:"summary"`
	// GroupBy names the grouping of Groups.
	GroupBy string  `json:"groupBy"`
	Groups  []Group `json:"groups"`
	// Waves is the rollout picture: one bar per wave of platform spec.rollout.waves, in order,
	// then RestWave (the clusters no wave matches); with no waves declared, one AllClusters
	// bar. Cluster repos of the control repo only; none when the control repo is unknown.
	Waves []Wave `json:"waves,omitempty"`
	// Window is where the control repo's change windows (spec.rollout.windows) stand at
	// GeneratedAt, and the next opening or closing; nil without windows.
	Window *report.RolloutWindow `json:"window,omitempty"`
	// Rollback is what rolling the rollout's revision back did (which revision, why, each
	// repo's restore); nil when the view's rollout was not rolled back.
	Rollback *report.RolloutRollback `json:"rollback,omitempty"`
	// Run is how far an apply in progress is (Input.Run); nil when none runs.
	Run *RunProgress `json:"run,omitempty"`
	// Repos are the rows. In JSON each is the status of its entry in the report's repos
	// (report.RepoStatus): one entry per repo, in one shape.
	Repos []Repo `json:"-"`

	// waves remembers how Build assigned waves, so Filtered can count its rows alike.
	waves rollout.View
}

// Summary counts repos per state, per what they wait on and per Flux health.
type Summary struct {
	Total     int            `json:"total"`
	States    map[State]int  `json:"states"`
	WaitingOn map[string]int `json:"waitingOn"`
	Health    map[string]int `json:"health"`
	// Line says it in one sentence.
	Line string `json:"line"`
}

// Group is one bar of the progress picture.
type Group struct {
	Name   string        `json:"name"`
	Total  int           `json:"total"`
	States map[State]int `json:"states"`
	// Done is how many repos carry the desired state (in sync).
	Done int `json:"done"`
	// Segments counts the repos per segment (healthy, done, open, pending, halted): the
	// bar is drawn from them, in the colours of the rollout's bars.
	Segments map[string]int `json:"segments"`
}

// Repo is one row: a target repo.
type Repo struct {
	// Repo is "owner/name"; Name the cluster, workspace or management cluster; Kind cluster,
	// workspace or management.
	Repo   string            `json:"repo"`
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`
	Labels map[string]string `json:"labels,omitempty"`
	Group  string            `json:"group"`
	// Wave is a cluster repo's rollout wave when the control repo declares waves (RestWave for
	// a cluster no wave matches); "" otherwise.
	Wave string `json:"wave,omitempty"`
	// Provisions lists, for a management repo, the clusters whose HelmRelease it holds
	// (spec.provision.managementCluster), sorted.
	Provisions []string `json:"provisions,omitempty"`
	// ProvisionedBy is, for a provisioned cluster, the management repo ("owner/name") holding
	// its HelmRelease.
	ProvisionedBy string `json:"provisionedBy,omitempty"`
	URL           string `json:"url,omitempty"`
	State         State  `json:"state"`
	// Revision is the control-repo revision rendered for the repo.
	Revision string `json:"revision,omitempty"`
	// PR is the open fleetbot pull request.
	PR *PR `json:"pr,omitempty"`
	// WaitingOn says who or what must act next ("" when nobody).
	WaitingOn string `json:"waitingOn,omitempty"`
	// Merged is the control-repo revision fleetbot last merged into the repo ("" unknown).
	Merged string `json:"merged,omitempty"`
	// Health is the combined commit status of the default-branch head (Flux posts one for
	// the commit it applied): success, pending, failure, error or unknown.
	Health string `json:"health"`
	// Failing are the head's failing commit statuses: which Kustomization or HelmRelease
	// fails, Flux's message and its link.
	Failing []report.HealthCheck `json:"failing,omitempty"`
	// Segment is where the repo counts in a progress bar, and the colour of its badge
	// (healthy, done, open, pending, halted): one meaning of each colour across the page.
	Segment string `json:"segment"`
	// Drift lists what differs from the desired state and no pull request carries.
	Drift []string `json:"drift,omitempty"`
	// Summary says it all in one line.
	Summary string `json:"summary"`
	// Action and Reason are the plan's (or apply's) decision; Error why it failed.
	Action string `json:"action,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// CheckedAt is when the result was computed.
	CheckedAt time.Time `json:"checkedAt,omitzero"`

	result *reconcile.Result
}

// Short is the repo's name without its owner (the detail page's path).
func (r *Repo) Short() string { return repoName(r.Repo) }

// Result is the reconcile result the row was built from (the detail page's report).
func (r *Repo) Result() *reconcile.Result { return r.result }

// PR is an open fleetbot pull request.
type PR struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	// Opened is when it was opened; AgeSeconds how long ago (0 when unknown).
	Opened     time.Time `json:"opened,omitzero"`
	AgeSeconds int64     `json:"ageSeconds,omitempty"`
	// Source is the control-repo revision it carries.
	Source string `json:"source,omitempty"`
	// Review is GitHub's review decision, Checks the combined status of its head ("" unknown).
	Review string `json:"review,omitempty"`
	Checks string `json:"checks,omitempty"`
}

// Age is the PR's age for people ("3d", "5h", "12m"; "" when unknown).
func (p *PR) Age() string {
	if p == nil || p.Opened.IsZero() {
		return ""
	}
	return HumanDuration(time.Duration(p.AgeSeconds) * time.Second)
}

// HumanDuration rounds a duration to its largest unit: "3d", "5h", "12m", "<1m".
func HumanDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return "<1m"
}

// Build computes the view. Results of the control repo itself (access only) are left out.
func Build(in Input, o Options) *Fleet {
	if o.GroupBy.Of == nil {
		o.GroupBy = ByKind()
	}
	f := &Fleet{Source: in.Source, GeneratedAt: in.Now, GroupBy: o.GroupBy.Name,
		Repos: make([]Repo, 0, len(in.Entries))}
	idx := indexControl(in.Control)
	// The rollout slice's entry for the control repo, at the time the view is shown.
	ro := rollout.New(in.Control, func() time.Time { return in.Now })
	f.waves = ro.View(in.Rollout, o.waves)
	for i := range in.Entries {
		e := &in.Entries[i]
		if e.Kind != fanout.KindCluster && e.Kind != fanout.KindWorkspace && e.Kind != fanout.KindManagement {
			continue
		}
		r := row(e, in)
		key := string(e.Kind) + "/" + e.Name
		r.Labels = idx.labels[key]
		r.Provisions = idx.provisions[key]
		r.ProvisionedBy = idx.provisionedBy[key]
		if e.Kind == fanout.KindCluster && f.waves.Declared() {
			r.Wave = f.waves.WaveOf(e.Name)
		}
		r.Group = o.GroupBy.Of(&r)
		r.Segment = segmentOf(&r, f.waves.HaltedOn())
		f.Repos = append(f.Repos, r)
	}
	f.Run = addRunRows(f, in, idx, o)
	byRepo := func(a, b Repo) int { return strings.Compare(a.Repo, b.Repo) }
	if !slices.IsSortedFunc(f.Repos, byRepo) { // serve's results come sorted
		slices.SortStableFunc(f.Repos, byRepo)
	}
	f.Summary = summarize(f.Repos)
	f.Summary.Line = withRun(f.Run, f.Summary.Line)
	f.Groups = groups(f.Repos)
	f.Waves = waveBars(&f.waves, f.Repos, true)
	if in.Rollout != nil {
		f.Rollback = in.Rollout.Rollback.Report()
	}
	if in.Rollout != nil && in.Rollout.Window != nil {
		f.Window = in.Rollout.Window.Report()
	} else {
		f.Window = ro.Windows().Report()
	}
	return f
}

// notApplied is the summary of a repo an apply in progress has not reached yet.
const notApplied = "not applied yet: the apply in progress reaches it"

// addRunRows adds a row for each repo an apply in progress plans and no result covers yet
// (pending: not applied yet), and counts the repos the run applied.
func addRunRows(f *Fleet, in Input, idx controlIndex, o Options) *RunProgress {
	run := in.Run
	if run == nil {
		return nil
	}
	p := &RunProgress{Source: run.Source, Started: run.Started, Total: len(run.Repos), Phase: run.Phase, Planned: run.Planned, ResumeAt: run.ResumeAt}
	if p.Phase == reconcile.PhaseApply {
		p.Phase, p.Planned = "", 0 // applying: the applied count says it all
	}
	entries := map[string]*Entry{}
	for i := range in.Entries {
		entries[strings.ToLower(in.Entries[i].Repo)] = &in.Entries[i]
	}
	for _, rr := range run.Repos {
		e := entries[strings.ToLower(rr.Repo)]
		if e != nil && e.Source == run.Source && !e.At.Before(run.Started) {
			p.Applied++
		}
		if e != nil {
			continue
		}
		r := Repo{Repo: rr.Repo, Name: rr.Name, Kind: string(rr.Kind), Revision: "", State: StatePending, WaitingOn: WaitApply,
			Health: HealthUnknown, Summary: notApplied}
		if in.RepoURL != nil {
			r.URL = in.RepoURL(rr.Repo)
		}
		key := string(rr.Kind) + "/" + rr.Name
		r.Labels, r.Provisions, r.ProvisionedBy = idx.labels[key], idx.provisions[key], idx.provisionedBy[key]
		if rr.Kind == fanout.KindCluster && f.waves.Declared() {
			r.Wave = f.waves.WaveOf(rr.Name)
		}
		r.Group = o.GroupBy.Of(&r)
		r.Segment = segmentOf(&r, f.waves.HaltedOn())
		f.Repos = append(f.Repos, r)
	}
	return p
}

// withRun starts a summary line with an apply in progress, if one runs.
func withRun(p *RunProgress, line string) string {
	if p == nil {
		return line
	}
	return p.Line() + "; " + line
}

// controlIndex is what rows take from the control repo, by "kind/name".
type controlIndex struct {
	labels        map[string]map[string]string
	provisions    map[string][]string
	provisionedBy map[string]string
}

// indexControl maps "kind/name" to the object's labels, a management cluster to the clusters
// it provisions, and a provisioned cluster to its management repo.
func indexControl(c *control.Repo) controlIndex {
	out := controlIndex{labels: map[string]map[string]string{}, provisions: map[string][]string{}, provisionedBy: map[string]string{}}
	if c == nil {
		return out
	}
	owner := ""
	if c.Platform != nil {
		owner = c.Platform.Spec.Owner + "/"
		for _, m := range c.Platform.Spec.ManagementClusters {
			var names []string
			for _, cl := range c.Provisioned(m.Name) {
				names = append(names, cl.Metadata.Name)
			}
			out.provisions[string(fanout.KindManagement)+"/"+m.Name] = names
		}
	}
	for _, cl := range c.Clusters {
		key := string(fanout.KindCluster) + "/" + cl.Metadata.Name
		out.labels[key] = cl.Metadata.Labels
		if p := cl.Spec.Provision; p != nil && p.ManagementCluster != "" {
			out.provisionedBy[key] = owner + c.ManagementRepo(p.ManagementCluster)
		}
	}
	for _, w := range c.Workspaces {
		out.labels[string(fanout.KindWorkspace)+"/"+w.Metadata.Name] = w.Metadata.Labels
	}
	return out
}

// row builds one repo's row from its result.
func row(e *Entry, in Input) Repo {
	res := e.Result
	r := Repo{Repo: res.Repo, Name: res.Name, Kind: string(res.Kind), Revision: firstNonEmpty(e.Source, in.Source),
		Action: string(res.Action), Reason: scrub(res.Reason), CheckedAt: e.At, Health: HealthUnknown, result: &e.Result}
	if in.RepoURL != nil {
		r.URL = in.RepoURL(res.Repo)
	}
	obs := res.Observed
	if obs == nil {
		obs = &pr.Observed{}
	}
	r.readHealth(obs)
	r.Merged = obs.Merged
	if p := obs.PR; p != nil {
		r.PR = &PR{Number: p.Number, URL: p.URL, Opened: p.Opened, Source: p.Source, Review: p.Review, Checks: p.Checks}
	}
	if res.Err != nil {
		r.Error = scrub(res.Err.Error())
	}
	outcome := res.Outcome()
	switch {
	case outcome.Class.Badge() != "":
		// The result's class decides: deferred, failed (retryable, invalid input) or blocked
		// (needs a human).
		r.State, r.WaitingOn = State(outcome.Class.Badge()), waitingFor(outcome)
	case res.Skipped != "":
		r.State = StateSkipped
	case e.Applied:
		r.State = appliedState(res.Action, r.PR != nil)
	default:
		r.State = plannedState(res.Action, r.PR != nil)
	}
	if e.Applied && res.PR > 0 && (r.State == StatePROpen || r.State == StateBlocked) {
		// The apply opened or updated the PR after the plan observed it: it now carries
		// this revision.
		if r.PR == nil || r.PR.Number != res.PR {
			r.PR = &PR{Number: res.PR}
		}
		r.PR.URL = firstNonEmpty(res.PRURL, r.PR.URL)
		if res.Action.Writes() {
			r.PR.Source, r.PR.Checks = r.Revision, ""
			if res.Action != pr.ActionUpdate {
				r.PR.Opened = e.At
			}
		}
	}
	if r.State == StateInSync && r.Merged == "" && res.Action.InSync() && r.PR == nil {
		// The default branch matches this revision's render.
		r.Merged = r.Revision
	}
	if r.State != StatePROpen && r.State != StateBlocked && r.State != StatePending {
		r.PR = nil
	}
	if r.PR != nil && !r.PR.Opened.IsZero() && in.Now.After(r.PR.Opened) {
		r.PR.AgeSeconds = int64(in.Now.Sub(r.PR.Opened) / time.Second)
	}
	if r.State == StatePROpen {
		r.WaitingOn = waitingOn(r.PR)
	}
	if r.State == StatePending {
		r.WaitingOn = WaitApply
	}
	r.markUnhealthy()
	r.Drift = drift(&res, e.Applied)
	r.Summary = summaryLine(&r, &res)
	return r
}

// credentialsInURL matches the userinfo of a URL ("https://x-access-token:ghs_...@host").
var credentialsInURL = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)

// scrub removes credentials from a message shown on the status pages and in status output. The
// forges already redact the URLs in their errors; this is the last line before a browser.
func scrub(s string) string {
	if !strings.Contains(s, "@") { // no userinfo: skip the regexp (it ran for every row of every page)
		return s
	}
	return credentialsInURL.ReplaceAllString(s, "${1}REDACTED@")
}

// plannedState is the state a plan's action shows: what would be written is pending. A
// rolled-back repo (pr.ActionRolledBack) writes nothing: its rollback pull request is open, or
// it holds the restored content.
func plannedState(a pr.Action, openPR bool) State {
	switch a {
	case pr.ActionNoop, pr.ActionCleanup, pr.ActionRolledBack:
		if openPR {
			return StatePROpen
		}
		return StateInSync
	case "":
		return StateFailed
	}
	return StatePending
}

// appliedState is the state an apply's action left the repo in.
func appliedState(a pr.Action, openPR bool) State {
	switch a {
	case pr.ActionNoop, pr.ActionCleanup, pr.ActionRolledBack:
		if openPR {
			return StatePROpen
		}
		return StateInSync
	case pr.ActionClose:
		return StateInSync
	case pr.ActionCreate, pr.ActionOpen, pr.ActionUpdate, pr.ActionRemove:
		return StatePROpen
	case "":
		return StateFailed
	}
	return StatePending
}

// waitingFor says what a repo that is not done waits on, from its outcome's reason: the
// rollout, the write budget or a rate limit (any other deferral too), or a human's commit.
func waitingFor(o report.Outcome) string {
	switch {
	case o.Reason == report.ReasonHeldByRollout:
		return WaitRollout
	case o.Class == report.ClassDeferred:
		return WaitBudget
	case o.Reason == report.ReasonHumanCommitOnBranch:
		return WaitHumanEdit
	}
	return ""
}

// deferredLine says why a deferred repo waits (the rollout's reason, a GitHub rate limit, the
// write budget) and, for a limit, until when, when the forge said.
func deferredLine(r *Repo, o report.Outcome) string {
	if r.WaitingOn == WaitRollout {
		return "deferred to the next run: " + firstLine(r.Error)
	}
	s := "deferred to the next run: write budget exhausted"
	if o.Reason == report.ReasonRateLimited {
		s = "deferred to the next run: GitHub rate limit"
	}
	if !o.RetryAt.IsZero() {
		s += " until " + o.RetryAt.UTC().Format(time.RFC3339)
	}
	return s
}

// waitingOn says what an open pull request waits on: failing or running checks first, then
// a review, then somebody merging it.
func waitingOn(p *PR) string {
	if p == nil {
		return WaitReview
	}
	switch p.Checks {
	case pr.StatusFailure, pr.StatusError, pr.StatusPending:
		return WaitChecks
	}
	if p.Review == pr.ReviewApproved {
		return WaitMerge
	}
	return WaitReview
}

// drift lists what differs from the desired state outside a pull request: access settings and
// CODEOWNERS errors (content differences travel in the PR).
func drift(res *reconcile.Result, applied bool) []string {
	var out []string
	if a := res.Access; a != nil && len(a.Drift) > 0 && !(applied && a.Applied) {
		out = append(out, fmt.Sprintf("access (%d)", len(a.Drift)))
	}
	if a := res.Access; a != nil && a.Refused != "" {
		out = append(out, "access removals refused")
	}
	if n := len(res.CodeownersErrors); n > 0 {
		out = append(out, fmt.Sprintf("CODEOWNERS errors (%d)", n))
	}
	return out
}

// readHealth reads a row's Flux health from what the forge observed of the default branch head:
// its combined commit status and the failing statuses (messages and links scrubbed).
func (r *Repo) readHealth(obs *pr.Observed) {
	if obs.BaseStatus != "" {
		r.Health = obs.BaseStatus
	}
	for _, c := range obs.BaseFailing {
		r.Failing = append(r.Failing, report.HealthCheck{Context: c.Context, Object: report.FluxObject(c.Context), State: c.State,
			Description: scrub(c.Description), URL: scrub(c.TargetURL)})
	}
}

// markUnhealthy makes a row whose default branch Flux reports failing unhealthy: that comes
// first, whatever fleetbot's pull request is doing. A row that failed, is blocked, deferred or
// skipped keeps that state.
func (r *Repo) markUnhealthy() {
	if unhealthy(r.Health) && (r.State == StateInSync || r.State == StatePROpen || r.State == StatePending) {
		r.State = StateUnhealthy
	}
}

// unhealthy reports whether a combined commit status says Flux fails.
func unhealthy(health string) bool { return health == pr.StatusFailure || health == pr.StatusError }

// healthLine says what fails on the cluster: "Kustomization/platform-metallb: <Flux's
// message>", and how many more.
func healthLine(r *Repo) string {
	if len(r.Failing) == 0 {
		return "Flux " + r.Health + " (no failing status named)"
	}
	f := r.Failing[0]
	s := "Flux " + f.State + ": " + f.What()
	if f.Description != "" {
		s += ": " + firstLine(f.Description)
	}
	if n := len(r.Failing) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// summaryLine is a row's one-line summary.
func summaryLine(r *Repo, res *reconcile.Result) string {
	var s string
	switch r.State {
	case StateUnhealthy:
		s = healthLine(r)
		if r.PR != nil {
			s += fmt.Sprintf("; PR #%d", r.PR.Number)
			if age := r.PR.Age(); age != "" {
				s += " open " + age
			}
			if r.WaitingOn != "" {
				s += ", waiting on " + r.WaitingOn
			}
		}
		if len(r.Drift) > 0 {
			s += "; drift: " + strings.Join(r.Drift, ", ")
		}
		return s
	case StateFailed:
		s = "failed: " + firstLine(r.Error)
	case StateDeferred:
		s = deferredLine(r, res.Outcome())
	case StateSkipped:
		s = "skipped (" + res.Skipped + ")"
	case StateBlocked:
		s = "blocked: " + scrub(res.Reason)
		if r.Error != "" {
			// Blocked by what the forge refused (a permission): the error says what.
			s = "blocked: " + firstLine(r.Error)
		}
	case StatePending:
		s = fmt.Sprintf("fleetbot would %s (+%d ~%d -%d files)", verb(res.Action), res.FilesAdded, res.FilesChanged, res.FilesRemoved)
	case StatePROpen:
		s = fmt.Sprintf("PR #%d", r.PR.Number)
		if age := r.PR.Age(); age != "" {
			s += " open " + age
		}
		s += ", waiting on " + r.WaitingOn
	case StateInSync:
		s = "in sync"
		if r.Merged != "" {
			s += " at " + report.ShortSHA(r.Merged)
		}
	}
	if r.Health != HealthUnknown && r.Health != pr.StatusSuccess {
		s += "; Flux " + r.Health
	}
	if len(r.Drift) > 0 {
		s += "; drift: " + strings.Join(r.Drift, ", ")
	}
	return s
}

func verb(a pr.Action) string {
	switch a {
	case pr.ActionCreate:
		return "create the repo"
	case pr.ActionOpen:
		return "open a PR"
	case pr.ActionUpdate:
		return "update the PR"
	case pr.ActionClose:
		return "close the PR"
	case pr.ActionRemove:
		return "remove the managed content"
	}
	return string(a)
}

// summarize counts the rows.
func summarize(repos []Repo) Summary {
	s := Summary{Total: len(repos), States: map[State]int{}, WaitingOn: map[string]int{}, Health: map[string]int{}}
	for i := range repos {
		r := &repos[i]
		s.States[r.State]++
		if r.WaitingOn != "" {
			s.WaitingOn[r.WaitingOn]++
		}
		s.Health[r.Health]++
	}
	var parts []string
	for _, st := range States {
		n := s.States[st]
		if n == 0 {
			continue
		}
		p := fmt.Sprintf("%d %s", n, st)
		if st == StatePROpen {
			var ws []string
			for _, w := range []string{WaitReview, WaitChecks, WaitMerge} {
				if c := countWaiting(repos, st, w); c > 0 {
					ws = append(ws, fmt.Sprintf("%d %s", c, w))
				}
			}
			if len(ws) > 0 {
				p += " (waiting on " + strings.Join(ws, ", ") + ")"
			}
		}
		parts = append(parts, p)
	}
	s.Line = fmt.Sprintf("%d %s", s.Total, plural(s.Total, "repo", "repos"))
	if len(parts) > 0 {
		s.Line += ": " + strings.Join(parts, ", ")
	}
	var hs []string
	for _, h := range slices.Sorted(maps.Keys(s.Health)) {
		hs = append(hs, fmt.Sprintf("%d %s", s.Health[h], h))
	}
	if len(hs) > 0 {
		s.Line += "; Flux health: " + strings.Join(hs, ", ")
	}
	return s
}

func countWaiting(repos []Repo, st State, w string) int {
	n := 0
	for i := range repos {
		if repos[i].State == st && repos[i].WaitingOn == w {
			n++
		}
	}
	return n
}

// groups builds one bar per group, sorted by name.
func groups(repos []Repo) []Group {
	idx := map[string]*Group{}
	for i := range repos {
		r := &repos[i]
		g := idx[r.Group]
		if g == nil {
			g = &Group{Name: r.Group, States: map[State]int{}, Segments: map[string]int{}}
			idx[r.Group] = g
		}
		g.Total++
		g.States[r.State]++
		g.Segments[r.Segment]++
		if r.State == StateInSync {
			g.Done++
		}
	}
	out := make([]Group, 0, len(idx))
	for _, name := range slices.Sorted(maps.Keys(idx)) {
		out = append(out, *idx[name])
	}
	return out
}

// Blocked reports whether any row is blocked on a human.
func (f *Fleet) Blocked() bool { return f.Summary.States[StateBlocked] > 0 }

// Failed returns the rows that failed.
func (f *Fleet) Failed() []Repo {
	var out []Repo
	for _, r := range f.Repos {
		if r.State == StateFailed {
			out = append(out, r)
		}
	}
	return out
}

// Find returns the row of a repo, by "owner/name" or name, nil when there is none.
func (f *Fleet) Find(name string) *Repo {
	for i := range f.Repos {
		r := &f.Repos[i]
		if strings.EqualFold(r.Repo, name) || strings.EqualFold(repoName(r.Repo), name) {
			return r
		}
	}
	return nil
}

func repoName(full string) string {
	_, n, ok := strings.Cut(full, "/")
	if !ok {
		return full
	}
	return n
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
