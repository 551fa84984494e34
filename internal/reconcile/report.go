package reconcile

import (
	"encoding/json"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// Result is what happened (or, in a plan, would happen) to one target repo. Its JSON is
// its Row, the report's entry of the repo (internal/report).
type Result struct {
	// Repo is "owner/repo".
	Repo   string
	Kind   fanout.Kind
	Name   string
	Action pr.Action
	// Reason says why, in words.
	Reason string
	// PR is the number of the pull request acted upon, and PRURL its URL.
	PR    int
	PRURL string
	// Merged is true when the pull request opened in this run was merged at
	// once (merge: auto on a pull request GitHub found already mergeable).
	Merged bool
	// Files are the differences between the default branch and the desired
	// tree.
	Files        []pr.FileChange
	FilesAdded   int
	FilesChanged int
	FilesRemoved int
	// Objects counts Kubernetes object changes per kind (only computed when
	// a PR is written).
	Objects map[string]pr.ObjectCounts
	// AccessChanged is true when the repo's access settings drift from (or
	// were converged to) the persona matrix, so apply writes them.
	AccessChanged bool
	// Access details the access drift: the plan, its steps in words, what is
	// kept, and a refusal by maxAccessRemovals. Nil when there is no drift.
	Access *AccessReport
	// CodeownersErrors are the problems GitHub (or, on the local forge, the
	// offline check) finds in the CODEOWNERS on the default branch.
	CodeownersErrors []policy.CodeownersError
	// Warnings are what fleetbot could not do on the repo without it being a failure (branch
	// protection that the organization's GitHub plan does not offer): what is not enforced
	// and how to fix it. Everything else was applied.
	Warnings []string
	// Provision says, for a management repo, what the plan does to each
	// provisioned cluster: created, values changed (old → new), orphaned or
	// destroyed (with its node pools and machines).
	Provision []string
	// Skipped says why the repo was left alone entirely ("archived").
	Skipped string
	// Observed is what the plan saw of the repo beyond the decision (heads,
	// commit status, the open PR's review and checks), for status views.
	Observed *pr.Observed
	// Err is why this repo failed (or was deferred). It carries its class (report.ClassOf):
	// see Outcome.
	Err error `json:"-"`
}

// fail records why the repo failed; the class travels in err (see Outcome).
func (r *Result) fail(err error) { r.Err = err }

// Outcome is what the result asks of whoever acts next (report.Outcome: a class, a machine
// reason, a retry time): the class Err carries (a rate limit that lifts at a known time, the
// write budget's next slot, the rollout's hold, a permission GitHub refuses, ...; an error that
// says nothing is retryable); with no error, needs-human for a pull request a human's commit
// blocks, done otherwise (an archived repo: done, ReasonArchived). It is derived, never stored,
// so that it cannot disagree with Err.
func (r Result) Outcome() report.Outcome {
	switch {
	case r.Err != nil:
		o := report.ClassOf(r.Err)
		if o.Class == report.ClassDone {
			o = report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError}
		}
		return o
	case r.Action == pr.ActionBlocked:
		return report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonHumanCommitOnBranch}
	case r.Skipped == SkippedArchived:
		return report.Outcome{Class: report.ClassDone, Reason: report.ReasonArchived}
	}
	return report.Done
}

// Deferred reports whether the repo waits for a later run by itself (its class is deferred:
// the write budget, a rate limit, the rollout): nothing (or only a resumable part) was
// written, and a later run picks the repo up. Err says why.
func (r Result) Deferred() bool { return r.Outcome().Class == report.ClassDeferred }

// MarshalJSON writes the result as the report's entry of the repo (see Row).
func (r Result) MarshalJSON() ([]byte, error) { return json.Marshal(r.Row()) }

// fromDecision records what a pull-request decision does to the repo: its action and why, the
// files and objects it changes, what the snapshot showed, the pull request it acts on.
func (r *Result) fromDecision(d *pr.Decision) {
	r.Action, r.Reason, r.Files = d.Action, d.Reason, d.Files
	r.FilesAdded, r.FilesChanged, r.FilesRemoved = d.Counts()
	r.Objects = pr.SummarizeObjects(d.Objects)
	obs := d.Observed
	r.Observed = &obs
	r.setPR(d.PR)
}

// setPR records the pull request acted upon, when there is one.
func (r *Result) setPR(p *pr.PullRequest) {
	if p != nil {
		r.PR, r.PRURL = p.Number, p.URL
	}
}

// Changed reports whether the repo's content, PR or access changes.
func (r Result) Changed() bool { return r.Action.Writes() || r.AccessChanged }

// Word is the one word for what happened to the repo, the same in every output (progress
// lines, the text and Markdown tables, their summary counts, the JSON "action" and the
// fleetbot_reconcile_outcomes_total label): the pr action ("create", "open", "update",
// "noop", "cleanup", "blocked", "close", "remove"), or "deferred", "failed" or "skipped".
func (r Result) Word() string {
	switch {
	case r.Deferred():
		return report.ActionDeferred
	case r.Err != nil:
		return report.ActionFailed
	case r.Skipped != "":
		return report.ActionSkipped
	case r.Action == "":
		return report.ActionNone
	}
	return string(r.Action)
}

// Line is a one-line progress summary with the same words and counts as the table, for
// example "acme/cluster-a: open PR #3 (+5 ~0 -0 files)".
func (r Result) Line() string { return r.Row().Line() }

// Row is the result as the report's typed entry of the repo.
func (r Result) Row() report.Repo {
	outcome := r.Outcome()
	if !outcome.RetryAt.IsZero() {
		outcome.RetryAt = outcome.RetryAt.UTC()
	}
	row := report.Repo{
		Repo: r.Repo, Kind: string(r.Kind), Name: r.Name, Action: r.Word(), Outcome: outcome,
		Writes: r.Action.Writes(), Changed: r.Changed(), Reason: r.Reason, Skipped: r.Skipped,
		Files:    report.Files{Added: r.FilesAdded, Changed: r.FilesChanged, Removed: r.FilesRemoved},
		Warnings: r.Warnings, Provision: r.Provision,
	}
	switch {
	case outcome.Class == report.ClassDeferred:
		row.Planned, row.Deferred = string(r.Action), r.Err.Error()
	case r.Err != nil:
		row.Planned = string(r.Action)
		row.Error = &report.Problem{Message: r.Err.Error()}
	case r.Action == pr.ActionBlocked:
		row.Blocked = r.Reason
	}
	if r.PR > 0 {
		row.PR = &report.PR{Number: r.PR, URL: r.PRURL, Merged: r.Merged}
	}
	for _, f := range r.Files {
		row.Files.List = append(row.Files.List, report.File{Path: f.Path, Op: f.Op})
	}
	if len(r.Objects) > 0 {
		row.Objects = make(map[string]report.Counts, len(r.Objects))
		for k, c := range r.Objects {
			row.Objects[k] = report.Counts{Added: c.Added, Changed: c.Changed, Removed: c.Removed}
		}
	}
	if r.Access != nil || r.AccessChanged {
		row.Access = &report.Access{Changed: r.AccessChanged}
		if a := r.Access; a != nil {
			row.Access.Applied, row.Access.Steps, row.Access.Notes, row.Access.Refused = a.Applied, a.Steps, a.Notes, a.Refused
		}
	}
	for _, e := range r.CodeownersErrors {
		file := e.Path
		if file == "" {
			file = "CODEOWNERS"
		}
		row.Codeowners = append(row.Codeowners, report.Problem{File: file, Line: e.Line, Kind: e.Kind, Message: e.Message})
	}
	return row
}

// warn adds a warning once.
func (r *Result) warn(w string) {
	if !slices.Contains(r.Warnings, w) {
		r.Warnings = append(r.Warnings, w)
	}
}

// Report is the outcome of a Plan or an Apply over every target repo. Its JSON is its
// Document (internal/report).
type Report struct {
	// Command is report.CommandPlan or report.CommandApply.
	Command string
	// Source is the control repo commit.
	Source string
	// Results has one entry per repo, sorted by repo.
	Results []Result
	// Rollout is the rollout gate's verdict when the control repo declares waves (nil
	// otherwise): which clusters were admitted, which wait and why, each wave's state.
	Rollout *rollout.Status `json:"-"`
	// Removals is how many target repos the plan removes; MaxRemovals the
	// cap it was checked against.
	Removals    int
	MaxRemovals int
	// Refused is set when the plan was refused (nothing was written). (The report's JSON
	// is its Document; the tag keeps a decoder of that JSON from meeting an interface.)
	Refused error `json:"-"`
	// Issues are control repo errors found against the forge (a team that
	// does not exist in the org): nothing was planned or written.
	Issues control.Issues
	// Scope says whether an incremental Apply planned every target repo or only the changed
	// ones, and why ("" for runs that are not incremental).
	Scope string
	// Incremental is true when the run planned only the changed target repos.
	Incremental bool

	started  time.Time
	duration time.Duration
}

// MarshalJSON writes the report's Document: the JSON every command shares.
func (r *Report) MarshalJSON() ([]byte, error) { return json.Marshal(r.Document()) }

// Document is the report as the typed document every output renders.
func (r *Report) Document() *report.Document {
	rows := make([]report.Repo, len(r.Results))
	for i, res := range r.Results {
		rows[i] = res.Row()
	}
	d := report.New(r.Command, r.Source, rows)
	d.Scope, d.Incremental = r.Scope, r.Incremental
	d.Removals, d.MaxRemovals = r.Removals, r.MaxRemovals
	if r.Refused != nil {
		d.Refused = r.Refused.Error()
	}
	for _, is := range r.Issues {
		d.Errors = append(d.Errors, report.Problem{File: is.Pos.File, Line: is.Pos.Line, Message: is.Message, Hint: is.Hint})
	}
	d.Rollout = r.Rollout.Report()
	return d
}

// finish sorts the results by repo, as every output lists them, and times the run.
func (r *Report) finish(now time.Time) {
	sort.SliceStable(r.Results, func(a, b int) bool { return r.Results[a].Repo < r.Results[b].Repo })
	if !r.started.IsZero() {
		r.duration = now.Sub(r.started)
	}
}

// Changed reports whether any repo changes (for --detailed-exitcode).
func (r *Report) Changed() bool {
	for _, res := range r.Results {
		if res.Changed() {
			return true
		}
	}
	return false
}

// Failed returns the results of the repos that failed (not those deferred).
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Err != nil && !res.Deferred() {
			out = append(out, res)
		}
	}
	return out
}

// Blocked returns the results of the repos that wait for a human: a commit on the bot branch
// that fleetbot did not make stops it from updating the pull request.
func (r *Report) Blocked() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Action == pr.ActionBlocked && res.Err == nil {
			out = append(out, res)
		}
	}
	return out
}

// Exit codes of plan and apply with --detailed-exitcode (DESIGN §7); without it, a run that
// did not fail exits 0. They are report.Class.ExitCode's.
const (
	ExitNoChanges = report.ExitDone
	ExitError     = report.ExitError
	ExitChanges   = report.ExitPending
	ExitBlocked   = report.ExitBlocked
)

// Class is the class of the run's most urgent repo (report.Worst).
func (r *Report) Class() report.Class {
	classes := make([]report.Class, len(r.Results))
	for i, res := range r.Results {
		classes[i] = res.Outcome().Class
	}
	return report.Worst(classes...)
}

// RetryAt is the earliest time a repo of the run may change by time alone (a rate limit's
// reset, the write budget's next slot, the end of a rollout's soak): when a queue should run it
// again. Zero when no repo names one.
func (r *Report) RetryAt() time.Time {
	outcomes := make([]report.Outcome, len(r.Results))
	for i, res := range r.Results {
		outcomes[i] = res.Outcome()
	}
	return report.EarliestRetry(outcomes...)
}

// ExitCode is the detailed exit code of a run that returned no error: that of its most urgent
// repo's class (report.Class.ExitCode: 3 when a repo waits for a human, 1 when one failed, 2
// for an apply that left repos deferred). A plan whose repos are all done or deferred exits 2
// when it would change something, 0 otherwise.
func (r *Report) ExitCode(applied bool) int {
	c := r.Class()
	if applied || (c != report.ClassDone && c != report.ClassDeferred) {
		return c.ExitCode()
	}
	if r.Changed() {
		return ExitChanges
	}
	return ExitNoChanges
}

// Deferred returns the results of the repos left for the next run because
// the write budget was exhausted.
func (r *Report) Deferred() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Deferred() {
			out = append(out, res)
		}
	}
	return out
}

// WriteText writes the summary table for a terminal.
func (r *Report) WriteText(w io.Writer) error { return r.Document().WriteText(w) }

// WriteMarkdown writes the summary for a PR comment or a job summary.
func (r *Report) WriteMarkdown(w io.Writer) error { return r.Document().WriteMarkdown(w) }
