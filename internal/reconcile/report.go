package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// Result is what happened (or, in a plan, would happen) to one target repo.
type Result struct {
	// Repo is "owner/repo".
	Repo   string      `json:"repo"`
	Kind   fanout.Kind `json:"kind"`
	Name   string      `json:"name"`
	Action pr.Action   `json:"action,omitempty"`
	// Reason says why, in words.
	Reason string `json:"reason,omitempty"`
	// PR is the number of the pull request acted upon, and PRURL its URL.
	PR    int    `json:"pr,omitempty"`
	PRURL string `json:"prUrl,omitempty"`
	// Merged is true when the pull request opened in this run was merged at
	// once (merge: auto on a pull request GitHub found already mergeable).
	Merged bool `json:"merged,omitempty"`
	// Files are the differences between the default branch and the desired
	// tree.
	Files        []pr.FileChange `json:"files,omitempty"`
	FilesAdded   int             `json:"filesAdded"`
	FilesChanged int             `json:"filesChanged"`
	FilesRemoved int             `json:"filesRemoved"`
	// Objects counts Kubernetes object changes per kind (only computed when
	// a PR is written).
	Objects map[string]pr.ObjectCounts `json:"objects,omitempty"`
	// AccessChanged is true when the repo's access settings drift from (or
	// were converged to) the persona matrix, so apply writes them.
	AccessChanged bool `json:"accessChanged,omitempty"`
	// Access details the access drift: the plan, its steps in words, what is
	// kept, and a refusal by maxAccessRemovals. Nil when there is no drift.
	Access *AccessReport `json:"access,omitempty"`
	// CodeownersErrors are the problems GitHub (or, on the local forge, the
	// offline check) finds in the CODEOWNERS on the default branch.
	CodeownersErrors []policy.CodeownersError `json:"codeownersErrors,omitempty"`
	// Warnings are what fleetbot could not do on the repo without it being a failure (branch
	// protection that the organization's GitHub plan does not offer): what is not enforced
	// and how to fix it. Everything else was applied.
	Warnings []string `json:"warnings,omitempty"`
	// Provision says, for a management repo, what the plan does to each
	// provisioned cluster: created, values changed (old → new), orphaned or
	// destroyed (with its node pools and machines).
	Provision []string `json:"provision,omitempty"`
	// Skipped says why the repo was left alone entirely ("archived").
	Skipped string `json:"skipped,omitempty"`
	// Observed is what the plan saw of the repo beyond the decision (heads,
	// commit status, the open PR's review and checks), for status views.
	Observed *pr.Observed `json:"observed,omitempty"`
	// Deferred is true when the forge's write budget could not afford this
	// repo's writes in this run: nothing (or only a resumable part) was
	// written, and the next run picks the repo up. Err says why.
	Deferred bool `json:"deferred,omitempty"`
	// Err is why this repo failed (or was deferred); the JSON form is its
	// message.
	Err error `json:"-"`
}

// fail records err, as a deferral when it wraps pr.ErrDeferred.
func (r *Result) fail(err error) {
	r.Err = err
	r.Deferred = errors.Is(err, pr.ErrDeferred)
}

// MarshalJSON adds "error" with Err's message.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	out := struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain: plain(r)}
	if r.Err != nil {
		out.Error = r.Err.Error()
	}
	return json.Marshal(out)
}

func (r *Result) fromDecision(d *pr.Decision) {
	r.Action, r.Reason, r.Files = d.Action, d.Reason, d.Files
	r.FilesAdded, r.FilesChanged, r.FilesRemoved = d.Counts()
	r.Objects = pr.SummarizeObjects(d.Objects)
	obs := d.Observed
	r.Observed = &obs
	r.setPR(d.PR)
}

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
// "noop", "blocked", "close", "remove"), or "deferred", "failed" or "skipped".
func (r Result) Word() string {
	switch {
	case r.Deferred:
		return "deferred"
	case r.Err != nil:
		return "failed"
	case r.Skipped != "":
		return "skipped"
	case r.Action == "":
		return "-"
	}
	return string(r.Action)
}

// Line is a one-line progress summary with the same words and counts as the table, for
// example "acme/cluster-a: open PR #3 (+5 ~0 -0 files)".
func (r Result) Line() string {
	s := r.Repo + ": " + r.Word()
	switch {
	case r.Deferred:
		return s + " (" + string(r.Action) + " waits for the next run): " + r.Err.Error()
	case r.Err != nil:
		return s + ": " + r.Err.Error()
	case r.Skipped != "":
		return s + " (" + r.Skipped + ")"
	}
	if r.PR > 0 {
		s += fmt.Sprintf(" PR #%d", r.PR)
		if r.Merged {
			s += " (merged)"
		}
	}
	if r.FilesAdded+r.FilesChanged+r.FilesRemoved > 0 {
		s += fmt.Sprintf(" (+%d ~%d -%d files)", r.FilesAdded, r.FilesChanged, r.FilesRemoved)
	}
	if r.AccessChanged {
		s += ", access converged"
	}
	if len(r.CodeownersErrors) > 0 {
		s += fmt.Sprintf(", %d CODEOWNERS error(s)", len(r.CodeownersErrors))
	}
	if r.Action == pr.ActionBlocked {
		s += ": " + r.Reason
	}
	for _, w := range r.Warnings {
		s += "\n  WARNING: " + w
	}
	return s
}

// warn adds a warning once.
func (r *Result) warn(w string) {
	if !slices.Contains(r.Warnings, w) {
		r.Warnings = append(r.Warnings, w)
	}
}

// Report is the outcome of a Plan or an Apply over every target repo.
type Report struct {
	// Source is the control repo commit.
	Source string `json:"source,omitempty"`
	// Results has one entry per repo, sorted by repo.
	Results []Result `json:"results"`
	// Removals is how many target repos the plan removes; MaxRemovals the
	// cap it was checked against.
	Removals    int `json:"removals"`
	MaxRemovals int `json:"maxRemovals"`
	// Refused is set when the plan was refused (nothing was written).
	Refused error `json:"-"`
	// Issues are control repo errors found against the forge (a team that
	// does not exist in the org): nothing was planned or written.
	Issues control.Issues `json:"issues,omitempty"`
	// Scope says whether an incremental Apply planned every target repo or only the changed
	// ones, and why ("" for runs that are not incremental).
	Scope string `json:"scope,omitempty"`
	// Incremental is true when the run planned only the changed target repos.
	Incremental bool `json:"incremental,omitempty"`

	started  time.Time
	duration time.Duration
}

// MarshalJSON adds "refused" with Refused's message.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	out := struct {
		*plain
		Refused string `json:"refused,omitempty"`
		Changed bool   `json:"changed"`
		Failed  int    `json:"failed"`
	}{plain: (*plain)(r), Changed: r.Changed(), Failed: len(r.Failed())}
	if r.Refused != nil {
		out.Refused = r.Refused.Error()
	}
	return json.Marshal(out)
}

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
		if res.Err != nil && !res.Deferred {
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
// did not fail exits 0.
const (
	ExitNoChanges = 0
	ExitError     = 1
	ExitChanges   = 2
	ExitBlocked   = 3
)

// ExitCode is the detailed exit code of a run that returned no error: ExitBlocked when a repo
// waits for a human (the most urgent), else ExitChanges when the plan would change something
// (for apply: left something undone, i.e. deferred), else ExitNoChanges.
func (r *Report) ExitCode(applied bool) int {
	switch {
	case len(r.Blocked()) > 0:
		return ExitBlocked
	case applied && len(r.Deferred()) > 0, !applied && r.Changed():
		return ExitChanges
	}
	return ExitNoChanges
}

// Deferred returns the results of the repos left for the next run because
// the write budget was exhausted.
func (r *Report) Deferred() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Deferred {
			out = append(out, res)
		}
	}
	return out
}

// counts summarises the results by Word: "1 failed, 1 noop, 2 open".
func (r *Report) counts() string {
	n := map[string]int{}
	for _, res := range r.Results {
		n[res.Word()]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return "nothing to plan" // an incremental run whose changes reach no repo
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

func objectsCell(m map[string]pr.ObjectCounts) string {
	if len(m) == 0 {
		return "-"
	}
	var a, c, d int
	for _, oc := range m {
		a, c, d = a+oc.Added, c+oc.Changed, d+oc.Removed
	}
	return fmt.Sprintf("+%d ~%d -%d", a, c, d)
}

func prCell(r Result) string {
	if r.PR == 0 {
		return "-"
	}
	return fmt.Sprintf("#%d", r.PR)
}

func detail(r Result) string {
	// The ACTION column already says deferred, failed or skipped: the detail says why.
	if r.Deferred {
		return "waits for the next run: " + r.Err.Error()
	}
	if r.Err != nil {
		return r.Err.Error()
	}
	s := r.Reason
	if r.Skipped != "" {
		return r.Skipped
	}
	add := func(part string) {
		if s != "" {
			s += "; "
		}
		s += part
	}
	if r.Access != nil && len(r.Access.Drift) > 0 {
		add(fmt.Sprintf("access drift (%d)", len(r.Access.Drift)))
	}
	if r.Access != nil && r.Access.Refused != "" {
		add("access removals refused")
	}
	if n := len(r.CodeownersErrors); n > 0 {
		add(fmt.Sprintf("%d CODEOWNERS error(s)", n))
	}
	for _, l := range r.Provision {
		add(l)
	}
	return s
}

// accessLines lists, per repo, the access drift, refusals and CODEOWNERS
// errors behind the table's short detail column.
func (r *Report) accessLines() map[string][]string {
	out := map[string][]string{}
	for _, res := range r.Results {
		var lines []string
		if res.Access != nil {
			verb := "would "
			if res.Access.Applied {
				verb = "did "
			}
			for _, d := range res.Access.Drift {
				if strings.HasPrefix(d, "kept") || strings.Contains(d, "the PR rewrites it") {
					lines = append(lines, d)
					continue
				}
				lines = append(lines, verb+d)
			}
			if res.Access.Refused != "" {
				lines = append(lines, "REFUSED: "+res.Access.Refused)
			}
		}
		for _, e := range res.CodeownersErrors {
			lines = append(lines, "CODEOWNERS error: "+e.String())
		}
		if len(lines) > 0 {
			out[res.Repo] = lines
		}
	}
	return out
}

// WriteText writes the summary table for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	if len(r.Issues) > 0 {
		return r.writeIssues(w)
	}
	if len(r.Results) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPO\tKIND\tACTION\tPR\tFILES\tOBJECTS\tDETAIL")
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t+%d ~%d -%d\t%s\t%s\n", res.Repo, res.Kind, res.Word(), prCell(res),
				res.FilesAdded, res.FilesChanged, res.FilesRemoved, objectsCell(res.Objects), detail(res))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d repos: %s", len(r.Results), r.counts())
	if r.Source != "" {
		fmt.Fprintf(w, " (source %s)", shortSHA(r.Source))
	}
	fmt.Fprintln(w)
	if r.Scope != "" {
		fmt.Fprintf(w, "Scope: %s\n", r.Scope)
	}
	if lines := r.accessLines(); len(lines) > 0 {
		fmt.Fprintln(w, "\nAccess:")
		for _, repo := range sortedKeys(lines) {
			fmt.Fprintf(w, "  %s\n", repo)
			for _, l := range lines[repo] {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
	}
	if r.Refused != nil {
		if _, err := fmt.Fprintf(w, "REFUSED: %v\n", r.Refused); err != nil {
			return err
		}
	}
	return nil
}

// writeIssues writes the control repo errors found against the forge.
func (r *Report) writeIssues(w io.Writer) error {
	_, err := fmt.Fprintf(w, "fleetbot: the control repo does not match the org; nothing was planned or written.\n%s\n", r.Issues.Error())
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WriteMarkdown writes the summary for a PR comment or a job summary.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("### fleetbot")
	if r.Source != "" {
		fmt.Fprintf(&b, " — source `%s`", shortSHA(r.Source))
	}
	if len(r.Issues) > 0 {
		b.WriteString("\n\n> [!CAUTION]\n> The control repo does not match the org: nothing was planned or written.\n\n")
		for _, is := range r.Issues {
			fmt.Fprintf(&b, "- `%s`: %s", is.Pos, mdEscape(is.Message))
			if is.Hint != "" {
				fmt.Fprintf(&b, " (%s)", mdEscape(is.Hint))
			}
			b.WriteString("\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "\n\n%d repos: %s\n\n", len(r.Results), r.counts())
	if r.Refused != nil {
		fmt.Fprintf(&b, "> [!CAUTION]\n> Refused: %s\n\n", mdEscape(r.Refused.Error()))
	}
	if len(r.Results) > 0 {
		b.WriteString("| repo | kind | action | PR | files | objects | detail |\n|---|---|---|---|---|---|---|\n")
	}
	for _, res := range r.Results {
		act := res.Word()
		if res.Err != nil {
			act = "**" + act + "**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | +%d ~%d -%d | %s | %s |\n", res.Repo, res.Kind, act, prCell(res),
			res.FilesAdded, res.FilesChanged, res.FilesRemoved, objectsCell(res.Objects), mdEscape(detail(res)))
	}
	if lines := r.accessLines(); len(lines) > 0 {
		b.WriteString("\n#### Access\n\n")
		for _, repo := range sortedKeys(lines) {
			fmt.Fprintf(&b, "- `%s`\n", repo)
			for _, l := range lines[repo] {
				fmt.Fprintf(&b, "  - %s\n", mdEscape(l))
			}
		}
	}
	for _, res := range r.Results {
		if len(res.Files) == 0 || !res.Action.Writes() {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary><code>%s</code>: %d files</summary>\n\n", res.Repo, len(res.Files))
		for _, f := range res.Files {
			fmt.Fprintf(&b, "- %s `%s`\n", f.Op, f.Path)
		}
		b.WriteString("\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func shortSHA(s string) string { return pr.ShortSHA12(s) }
