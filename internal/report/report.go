// Package report is the one report of a fleetbot run: what plan, apply, check and status found
// or did, per target repo, as typed values (Document, Repo, Problem) rendered three ways — text
// for a terminal, Markdown for a pull-request comment or an Action step summary, and JSON with a
// format_version — so that every front end and every output says the same thing in the same
// words. It also holds the one error vocabulary (class.go): the class every repo's result
// carries (done, deferred until a time, retryable, needs-human, invalid-input), the errors that
// carry it from an adapter to a front end, and what a class means for an exit code, a check
// conclusion and the status page. It is pure: it imports nothing of fleetbot's, and the
// packages that compute results (reconcile, status, review, the CLI) build its values directly.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// FormatVersion is the version of the JSON document. It changes only when a field changes
// meaning or disappears; new fields may appear in the same version. Version 2: status lists
// each repo once, in repos, with its status there (version 1 had the view's rows again in
// status.repos).
const FormatVersion = 2

// Commands a Document reports on.
const (
	CommandValidate = "validate"
	CommandPlan     = "plan"
	CommandApply    = "apply"
	CommandCheck    = "check"
	CommandStatus   = "status"
	CommandRollout  = "rollout"
	CommandVersion  = "version"
)

// Commands lists every Command value, for the schema and the docs.
var Commands = []string{CommandValidate, CommandPlan, CommandApply, CommandCheck, CommandStatus, CommandRollout, CommandVersion}

// The pull-request actions of Repo.Action that say the content is left as it is.
const (
	// ActionNoop: the repo, or its open pull request, already carries the desired tree, and
	// the run writes nothing.
	ActionNoop = "noop"
	// ActionCleanup: the default branch already carries the desired tree; the run only tidies
	// up after a finished pull request (deletes its bot branch, records a merge done with plain
	// git on the local forge). A run that writes anything is never called noop.
	ActionCleanup = "cleanup"
)

// Actions lists every word of Repo.Action, in the order the docs list them.
var Actions = []string{"create", "open", "update", ActionNoop, ActionCleanup, ActionBlocked, "close", "remove",
	"rolled-back", ActionDeferred, ActionFailed, ActionSkipped, ActionNone}

// Actions of Repo.Action beyond the pull-request actions ("create", "open", "update", "noop",
// "cleanup", "blocked", "close", "remove"): what happened instead of the planned action.
const (
	ActionDeferred = "deferred"
	ActionFailed   = "failed"
	ActionSkipped  = "skipped"
	ActionBlocked  = "blocked"
	// ActionNone is the action of a repo that was never planned (its plan failed first).
	ActionNone = "-"
)

// Document is one run's report: the same shape for plan, apply, check, status and version, each
// filling the parts it has.
type Document struct {
	// FormatVersion is FormatVersion; a reader checks it first.
	FormatVersion int `json:"format_version"`
	// Command is what produced the document: validate, plan, apply, check, status, rollout
	// (rollout status) or version.
	Command string `json:"command"`
	// Source is the control-repo commit the run rendered ("<sha>-dirty" for an uncommitted
	// work tree; "" when unknown).
	Source string `json:"source,omitempty"`
	// Scope says whether an incremental apply planned every target repo or only the changed
	// ones, and why.
	Scope string `json:"scope,omitempty"`
	// Incremental is true when the run planned only the changed target repos.
	Incremental bool `json:"incremental,omitempty"`
	// Summary counts the repos by action.
	Summary Summary `json:"summary"`
	// Repos has one entry per target repo (and the control repo, whose access fleetbot
	// guards), sorted by repo.
	Repos []Repo `json:"repos"`
	// Removals is how many target repos the plan removes, and MaxRemovals the cap it was
	// checked against (plan and apply).
	Removals    int `json:"removals,omitempty"`
	MaxRemovals int `json:"maxRemovals,omitempty"`
	// Refused says why the run was refused as a whole (mass removals): nothing was written.
	Refused string `json:"refused,omitempty"`
	// Errors are the problems of the run's input, each with file:line where known: control
	// repo errors (nothing was planned or written), or what a check found.
	Errors []Problem `json:"errors,omitempty"`
	// Warnings are the control repo's findings that are valid but almost always a mistake (a
	// component selector matching no cluster), each with file:line (validate).
	Warnings []Problem `json:"warnings,omitempty"`
	// Validated counts what a valid control repo renders (validate).
	Validated *Validated `json:"validated,omitempty"`
	// Checked lists what a check of a workspace or cluster repo rendered (its kustomization
	// directories).
	Checked []string `json:"checked,omitempty"`
	// Review is check control's verdict on a control-repo change (review.Report).
	Review any `json:"review,omitempty"`
	// Desired is an offline plan's desired state per target repo (plan without --forge): the
	// files, objects per kind, access and reviewers fleetbot would propose.
	Desired []DesiredRepo `json:"desired,omitempty"`
	// Status is the fleet view of status (status.Fleet): per repo its state, revision, open
	// pull request and what it waits on, Flux health and drift, with a summary and groups.
	Status any `json:"status,omitempty"`
	// Rollout is the rollout gate's verdict on the revision, wave by wave (rollout status,
	// and a plan against a forge when the control repo declares waves).
	Rollout *Rollout `json:"rollout,omitempty"`
	// Build is the version of fleetbot (version).
	Build *Build `json:"build,omitempty"`
}

// Validated counts the target repos and apps of a valid control repo.
type Validated struct {
	// Clusters, Workspaces and Management count the target repos per kind.
	Clusters   int `json:"clusters"`
	Workspaces int `json:"workspaces"`
	Management int `json:"management"`
	// Apps counts the catalog's apps.
	Apps int `json:"apps"`
}

// Summary counts a document's repos.
type Summary struct {
	// Repos is the number of entries in Repos.
	Repos int `json:"repos"`
	// Actions counts the repos per Repo.Action.
	Actions map[string]int `json:"actions"`
	// Changed is true when a repo's content, pull request or access changes (plan: would
	// change).
	Changed bool `json:"changed"`
	// Failed, Blocked and Deferred count the repos that failed, wait for a human, or wait
	// for the next run's write budget.
	Failed   int `json:"failed"`
	Blocked  int `json:"blocked"`
	Deferred int `json:"deferred"`
}

// Repo is what happened (or, in a plan, would happen) to one target repo.
type Repo struct {
	// Repo is "owner/name"; Name the cluster, workspace or control repo it renders.
	Repo string `json:"repo"`
	// Kind is cluster, workspace, management or control.
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	// Action is the one word for the outcome, the same in every output: create, open,
	// update, noop, cleanup, blocked, close, remove, deferred, failed or skipped ("-" when the
	// repo was never planned).
	Action string `json:"action"`
	// Outcome is what the result asks of whoever acts next: its class (done, deferred,
	// retryable, needs-human or invalid-input), a machine reason (RateLimited,
	// HumanCommitOnBranch, ...) and, when known, the time to retry it. Exit codes, check
	// conclusions and the status page all read it.
	Outcome Outcome `json:"outcome"`
	// Planned is the pull-request action the repo was planned for, when Action says it did
	// not happen (deferred, failed, skipped).
	Planned string `json:"planned,omitempty"`
	// Writes is true when the planned action writes the repo's content or pull request.
	Writes bool `json:"writes"`
	// Changed is true when the repo's content, pull request or access changes.
	Changed bool `json:"changed"`
	// Reason says why, in words.
	Reason string `json:"reason,omitempty"`
	// Blocked is why the repo waits for a human (Action blocked): a commit fleetbot did not
	// make on its branch.
	Blocked string `json:"blocked,omitempty"`
	// Skipped is why the repo was left alone entirely ("archived").
	Skipped string `json:"skipped,omitempty"`
	// Deferred is why the repo waits for the next run (the write budget).
	Deferred string `json:"deferred,omitempty"`
	// Error is why the repo failed.
	Error *Problem `json:"error,omitempty"`
	// PR is the pull request acted upon.
	PR *PR `json:"pr,omitempty"`
	// Files are the differences between the default branch and the desired tree: what the
	// repo's pull request carries. Writes says whether this run writes them (a noop's open
	// pull request carries them already); the text and Markdown tables show them only then.
	Files Files `json:"files"`
	// Objects counts Kubernetes object changes per kind (when a pull request is written).
	Objects map[string]Counts `json:"objects,omitempty"`
	// Access is the repo's access drift and what apply does about it.
	Access *Access `json:"access,omitempty"`
	// Codeowners are the problems GitHub (or the local forge's offline check) finds in the
	// CODEOWNERS on the default branch, each with file:line.
	Codeowners []Problem `json:"codeowners,omitempty"`
	// Warnings are what fleetbot could not do without it being a failure, and how to fix it.
	Warnings []string `json:"warnings,omitempty"`
	// Provision says, for a management repo, what the change does to each provisioned
	// cluster: created, values changed (old → new), orphaned or destroyed (with its node
	// pools and machines).
	Provision []string `json:"provision,omitempty"`
	// Status is where the repo stands (status only): its state, open pull request, Flux
	// health and drift.
	Status *RepoStatus `json:"status,omitempty"`
}

// PR is a pull request.
type PR struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	// Merged is true when the pull request opened in this run was merged at once.
	Merged bool `json:"merged,omitempty"`
}

// Files counts file changes and lists them.
type Files struct {
	Added   int    `json:"added"`
	Changed int    `json:"changed"`
	Removed int    `json:"removed"`
	List    []File `json:"list,omitempty"`
}

// File is one changed file.
type File struct {
	Path string `json:"path"`
	// Op is added, changed or removed.
	Op string `json:"op"`
}

// Counts counts object changes of one kind.
type Counts struct {
	Added   int `json:"added"`
	Changed int `json:"changed"`
	Removed int `json:"removed"`
}

// Access is a repo's access drift (team roles, collaborators, branch protection) against the
// persona matrix.
type Access struct {
	// Changed is true when apply writes the repo's access settings.
	Changed bool `json:"changed"`
	// Applied is true once apply converged them.
	Applied bool `json:"applied,omitempty"`
	// Steps are what apply does (or did), one each: "grant team x push".
	Steps []string `json:"steps,omitempty"`
	// Notes are what apply leaves as it is and why (additive mode, protected names, a
	// CODEOWNERS the pull request rewrites).
	Notes []string `json:"notes,omitempty"`
	// Refused is why the removals exceed maxAccessRemovals (nothing was written).
	Refused string `json:"refused,omitempty"`
}

// Drift is the number of lines of drift (steps and notes).
func (a *Access) Drift() int { return len(a.Steps) + len(a.Notes) }

// Problem is one error or finding, with where it is.
type Problem struct {
	// File and Line locate it (Line 0: the whole file or unknown); both empty when the
	// problem has no place in a file (a failed API call).
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Object is "Kind/name" when it is about a rendered object.
	Object string `json:"object,omitempty"`
	// Kind classifies it where the source does (GitHub's CODEOWNERS error kinds: "Unknown
	// owner", "Invalid pattern").
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// Hint says how to fix it.
	Hint string `json:"hint,omitempty"`
}

// Pos is "file:line", the file alone when the line is unknown, or "".
func (p Problem) Pos() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

// String is "file:line: object: kind: message" without the parts that are empty.
func (p Problem) String() string {
	var parts []string
	for _, s := range []string{p.Pos(), p.Object, p.Kind, p.Message} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// Build is fleetbot's version.
type Build struct {
	Version string `json:"version"`
	// Go is the Go release it was built with; OS and Arch its platform.
	Go   string `json:"go"`
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// Revision is the fleetbot commit it was built from, when the build recorded it.
	Revision string `json:"revision,omitempty"`
}

// New returns a document of command over repos, with its summary counted from them.
func New(command, source string, repos []Repo) *Document {
	if repos == nil {
		repos = []Repo{}
	}
	return &Document{FormatVersion: FormatVersion, Command: command, Source: source, Repos: repos, Summary: Summarize(repos)}
}

// Summarize counts repos by action.
func Summarize(repos []Repo) Summary {
	s := Summary{Repos: len(repos), Actions: map[string]int{}}
	for _, r := range repos {
		s.Actions[r.Action]++
		s.Changed = s.Changed || r.Changed
		switch r.Action {
		case ActionFailed:
			s.Failed++
		case ActionBlocked:
			s.Blocked++
		case ActionDeferred:
			s.Deferred++
		}
	}
	return s
}

// Class is the class of the document's most urgent repo (report.Worst): what its exit code
// and check conclusion follow.
func (d *Document) Class() Class {
	classes := make([]Class, len(d.Repos))
	for i, r := range d.Repos {
		classes[i] = r.Outcome.Class
	}
	return Worst(classes...)
}

// RetryAt is the earliest time a repo of the document may change by time alone (a rate
// limit's reset, the write budget's next slot, a rollout's soak ending); zero when none is
// known.
func (d *Document) RetryAt() time.Time {
	outcomes := make([]Outcome, len(d.Repos))
	for i, r := range d.Repos {
		outcomes[i] = r.Outcome
	}
	return EarliestRetry(outcomes...)
}

// Decode reads a document and checks its format_version.
func Decode(data []byte) (*Document, error) {
	var d Document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decoding a fleetbot report: %w", err)
	}
	switch d.FormatVersion {
	case FormatVersion:
	case 0:
		return nil, fmt.Errorf("the document has no format_version, this fleetbot reads %d: it is no fleetbot report, or one from before format_version (docs/report.md says what changed)", FormatVersion)
	default:
		return nil, fmt.Errorf("the fleetbot report has format_version %d, this fleetbot reads %d: read it with the fleetbot release that wrote it", d.FormatVersion, FormatVersion)
	}
	return &d, nil
}

// WriteJSON writes the document as indented JSON.
func (d *Document) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// counts summarises the repos by action: "1 failed, 1 noop, 2 open".
func (d *Document) counts() string {
	n := d.Summary.Actions
	if len(n) == 0 {
		return "nothing to plan" // an incremental run whose changes reach no repo
	}
	keys := slices.Sorted(maps.Keys(n))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

// ShortSHA abbreviates a commit SHA as GitHub shows it (7 characters), keeping the "-dirty"
// of a render of uncommitted edits: the short form must not claim the commit. It is the one
// abbreviation every report, pull request body, comment and log line uses.
func ShortSHA(sha string) string { return abbreviate(sha, 7) }

// ShortSHA12 abbreviates a SHA to 12 characters (report headers), keeping "-dirty".
func ShortSHA12(sha string) string { return abbreviate(sha, 12) }

// abbreviate cuts a SHA to n characters, keeping a "-dirty" suffix.
func abbreviate(sha string, n int) string {
	base, dirty := strings.CutSuffix(sha, "-dirty")
	if len(base) > n {
		base = base[:n]
	}
	if dirty {
		return base + "-dirty"
	}
	return base
}
