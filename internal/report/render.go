package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Line is a one-line progress summary of a repo with the same words and counts as the table,
// for example "acme/cluster-a: open PR #3 (+5 ~0 -0 files)".
func (r Repo) Line() string {
	s := r.Repo + ": " + r.Action
	switch {
	case r.Action == ActionDeferred:
		return s + " (" + r.Planned + " waits for the next run): " + r.Deferred
	case r.Error != nil:
		return s + ": " + r.Error.String()
	case r.Skipped != "":
		return s + " (" + r.Skipped + ")"
	}
	if r.PR != nil && r.PR.Number > 0 {
		s += fmt.Sprintf(" PR #%d", r.PR.Number)
		if r.PR.Merged {
			s += " (merged)"
		}
	}
	if r.writesContent() && r.Files.Added+r.Files.Changed+r.Files.Removed > 0 {
		// What this run writes: a noop's open PR already carries its files.
		s += fmt.Sprintf(" (+%d ~%d -%d files)", r.Files.Added, r.Files.Changed, r.Files.Removed)
	}
	if r.Access != nil && r.Access.Changed {
		s += ", access converged"
	}
	if len(r.Codeowners) > 0 {
		s += fmt.Sprintf(", %d CODEOWNERS error(s)", len(r.Codeowners))
	}
	if r.Action == ActionBlocked {
		s += ": " + r.Blocked
	}
	for _, w := range r.Warnings {
		s += "\n  WARNING: " + w
	}
	return s
}

func (r Repo) prCell() string {
	if r.PR == nil || r.PR.Number == 0 {
		return "-"
	}
	return fmt.Sprintf("#%d", r.PR.Number)
}

// writesContent reports whether the run writes (a plan: would write) the repo's content or
// pull request: not a noop, cleanup or blocked repo (an open pull request's files are not this
// run's change), nor one that failed, was deferred or skipped.
func (r Repo) writesContent() bool {
	return r.Writes && r.Error == nil && r.Action != ActionDeferred && r.Action != ActionFailed && r.Skipped == ""
}

// filesCell counts the files this run writes; "-" when it writes none.
func (r Repo) filesCell() string {
	if !r.writesContent() {
		return "-"
	}
	return fmt.Sprintf("+%d ~%d -%d", r.Files.Added, r.Files.Changed, r.Files.Removed)
}

func (r Repo) objectsCell() string {
	if len(r.Objects) == 0 || !r.writesContent() {
		return "-"
	}
	var a, c, d int
	for _, oc := range r.Objects {
		a, c, d = a+oc.Added, c+oc.Changed, d+oc.Removed
	}
	return fmt.Sprintf("+%d ~%d -%d", a, c, d)
}

// detail is the table's last column: why the action (deferred, failed, skipped), or the reason
// and what else to look at.
func (r Repo) detail() string {
	switch {
	case r.Action == ActionDeferred:
		return "waits for the next run: " + r.Deferred
	case r.Error != nil:
		return r.Error.String()
	case r.Skipped != "":
		return r.Skipped
	}
	s := r.Reason
	add := func(part string) {
		if s != "" {
			s += "; "
		}
		s += part
	}
	if a := r.Access; a != nil && a.Drift() > 0 {
		add(fmt.Sprintf("access drift (%d)", a.Drift()))
	}
	if r.Access != nil && r.Access.Refused != "" {
		add("access removals refused")
	}
	if n := len(r.Codeowners); n > 0 {
		add(fmt.Sprintf("%d CODEOWNERS error(s)", n))
	}
	for _, l := range r.Provision {
		add(l)
	}
	return s
}

// accessLines lists a repo's access drift, refusal and CODEOWNERS errors behind the table's
// short detail column.
func (r Repo) accessLines() []string {
	var lines []string
	if a := r.Access; a != nil {
		verb := "would "
		if a.Applied {
			verb = "did "
		}
		for _, s := range a.Steps {
			lines = append(lines, verb+s)
		}
		lines = append(lines, a.Notes...)
		if a.Refused != "" {
			lines = append(lines, "REFUSED: "+a.Refused)
		}
	}
	for _, e := range r.Codeowners {
		lines = append(lines, "CODEOWNERS error: "+e.String())
	}
	return lines
}

// View says how much of a document the text and Markdown renderings show.
type View struct {
	// Detail lists every repo. Without it the table lists the repos the run changes or that
	// need a look, and counts the quiet ones (noop and cleanup with nothing else to say) in one
	// line: at a thousand repos, the table is the changes, not the fleet.
	Detail bool
	// Limit caps the rows the table lists, the repos of the access lines and the folded warnings
	// (0: no cap): the most urgent rows first (failed, blocked, deferred before the changes),
	// the rest counted in one line that says where the whole report is (Rest). The Action's log
	// and job summary set it, so a thousand changed repos stay a page.
	Limit int
	// Rest says where the rows a Limit leaves out are, e.g. "the plan-json output".
	Rest string
}

// limitRows keeps the first v.Limit rows by urgency (the most urgent class first, then by
// repo, as d.Repos are sorted) and returns how many it left out.
func (v View) limitRows(rows []Repo) ([]Repo, int) {
	if v.Limit <= 0 || len(rows) <= v.Limit {
		return rows, 0
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Repo) int { return b.Outcome.Class.rank() - a.Outcome.Class.rank() })
	return sorted[:v.Limit], len(rows) - v.Limit
}

// moreLine counts the rows a Limit left out and says where they are.
func (v View) moreLine(n int) string {
	s := fmt.Sprintf("and %d more %s that change or need a look", n, plural(n, "repo", "repos"))
	if v.Rest != "" {
		s += ": " + v.Rest + " lists every repo"
	}
	return s
}

// limitFolded keeps the first v.Limit folded warnings.
func (v View) limitFolded(f []Folded) ([]Folded, int) {
	if v.Limit <= 0 || len(f) <= v.Limit {
		return f, 0
	}
	return f[:v.Limit], len(f) - v.Limit
}

// Quiet reports whether a repo has nothing to say beyond its action word: nothing written but
// housekeeping (noop, cleanup), no access change, no error, no CODEOWNERS problem. The compact
// view counts such repos instead of listing them.
func (r Repo) Quiet() bool {
	return (r.Action == ActionNoop || r.Action == ActionCleanup) && !r.Changed && r.Error == nil && len(r.Codeowners) == 0
}

// listed returns the repos a view's table lists and how many it leaves out.
func (d *Document) listed(v View) (rows []Repo, quiet int) {
	if v.Detail {
		return d.Repos, 0
	}
	for _, r := range d.Repos {
		if r.Quiet() {
			quiet++
			continue
		}
		rows = append(rows, r)
	}
	return rows, quiet
}

// quietLine says how many repos the compact table left out, and how to see them: --detail, or
// where v says the whole report is.
func (d *Document) quietLine(quiet int, v View) string {
	n := map[string]int{}
	for _, r := range d.Repos {
		if r.Quiet() {
			n[r.Action]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	how := "--detail lists every repo"
	if v.Rest != "" {
		how = v.Rest + " lists every repo"
	}
	return fmt.Sprintf("not listed: %d %s with nothing to do (%s); %s", quiet,
		plural(quiet, "repo", "repos"), strings.Join(parts, ", "), how)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WriteText writes the whole report for a terminal (every repo): WriteTextView with Detail.
func (d *Document) WriteText(w io.Writer) error { return d.WriteTextView(w, View{Detail: true}) }

// WriteTextView writes the report for a terminal: the table (the repos v lists), the access
// lines, the warnings folded (each text once, with how many repos and which), the scope, a
// refusal, and last the summary line, so the end of a long output says how it ended.
func (d *Document) WriteTextView(w io.Writer, v View) error {
	if len(d.Errors) > 0 {
		return d.writeErrorsText(w)
	}
	var b strings.Builder
	rows, quiet := d.listed(v)
	rows, more := v.limitRows(rows)
	if len(rows) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPO\tKIND\tACTION\tPR\tFILES\tOBJECTS\tDETAIL")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Repo, r.Kind, r.Action, r.prCell(), r.filesCell(), r.objectsCell(), r.detail())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if more > 0 {
		fmt.Fprintln(&b, v.moreLine(more))
	}
	if quiet > 0 {
		fmt.Fprintln(&b, d.quietLine(quiet, v))
	}
	access, moreAccess := d.accessRepos(v)
	for i, r := range access {
		if i == 0 {
			b.WriteString("\nAccess:\n")
		}
		fmt.Fprintf(&b, "  %s\n", r.Repo)
		for _, l := range r.accessLines() {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	if moreAccess > 0 {
		fmt.Fprintf(&b, "  and %d more %s with access changes or errors\n", moreAccess, plural(moreAccess, "repo", "repos"))
	}
	folded, moreFolded := v.limitFolded(FoldRepoWarnings(d.Repos))
	if len(folded) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, f := range folded {
			fmt.Fprintf(&b, "  WARNING (%s): %s\n", f.Where(), f.Text)
		}
	}
	if moreFolded > 0 {
		fmt.Fprintf(&b, "  and %d more %s\n", moreFolded, plural(moreFolded, "warning", "warnings"))
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	if d.Scope != "" {
		fmt.Fprintf(&b, "Scope: %s\n", d.Scope)
	}
	if d.Refused != "" {
		fmt.Fprintf(&b, "REFUSED: %s\n", d.Refused)
	}
	b.WriteString(d.SummaryLine())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// SummaryLine is the report in one line: "6 repos: 1 open, 5 noop (source 0123456789ab)".
func (d *Document) SummaryLine() string {
	s := fmt.Sprintf("%d repos: %s", len(d.Repos), d.counts())
	if d.Source != "" {
		s += fmt.Sprintf(" (source %s)", ShortSHA12(d.Source))
	}
	return s
}

// writeErrorsText writes the control repo errors that stopped the run, one per line with its
// file:line and hint.
func (d *Document) writeErrorsText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("fleetbot: the control repo does not match the org; nothing was planned or written.\n")
	fmt.Fprintf(&b, "%d problem(s) in the control repo:", len(d.Errors))
	for _, p := range d.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", p.Pos(), p.Message)
		if p.Hint != "" {
			fmt.Fprintf(&b, "\n      hint: %s", p.Hint)
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the whole report (every repo) for a pull-request comment or an Action
// step summary: WriteMarkdownView with Detail.
func (d *Document) WriteMarkdown(w io.Writer) error {
	return d.WriteMarkdownView(w, View{Detail: true})
}

// WriteMarkdownView writes the report for a pull-request comment or an Action step summary:
// the counts first (a comment's reader sees them without scrolling), the table of the repos v
// lists, access lines, the warnings folded, and each written repo's files.
func (d *Document) WriteMarkdownView(w io.Writer, v View) error {
	var b strings.Builder
	b.WriteString("### fleetbot")
	if d.Source != "" {
		fmt.Fprintf(&b, " — source `%s`", ShortSHA12(d.Source))
	}
	if len(d.Errors) > 0 {
		b.WriteString("\n\n> [!CAUTION]\n> The control repo does not match the org: nothing was planned or written.\n\n")
		for _, p := range d.Errors {
			fmt.Fprintf(&b, "- `%s`: %s", p.Pos(), mdEscape(p.Message))
			if p.Hint != "" {
				fmt.Fprintf(&b, " (%s)", mdEscape(p.Hint))
			}
			b.WriteString("\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "\n\n%d repos: %s\n\n", len(d.Repos), d.counts())
	if d.Scope != "" {
		fmt.Fprintf(&b, "Scope: %s\n\n", mdEscape(d.Scope))
	}
	if d.Refused != "" {
		fmt.Fprintf(&b, "> [!CAUTION]\n> Refused: %s\n\n", mdEscape(d.Refused))
	}
	rows, quiet := d.listed(v)
	rows, more := v.limitRows(rows)
	if len(rows) > 0 {
		b.WriteString("| repo | kind | action | PR | files | objects | detail |\n|---|---|---|---|---|---|---|\n")
	}
	for _, r := range rows {
		act := r.Action
		if r.Error != nil || r.Action == ActionDeferred {
			act = "**" + act + "**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", r.Repo, r.Kind, act, r.prCell(),
			r.filesCell(), r.objectsCell(), mdEscape(r.detail()))
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n%s.\n", mdEscape(v.moreLine(more)))
	}
	if quiet > 0 {
		fmt.Fprintf(&b, "\n%s.\n", mdEscape(d.quietLine(quiet, v)))
	}
	d.writeMarkdownDetails(&b, v, rows)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarkdownDetails writes what follows the table: the access lines per repo, the warnings
// folded, and the files of each repo the run writes (with a Limit, of the rows listed only).
func (d *Document) writeMarkdownDetails(b *strings.Builder, v View, rows []Repo) {
	access, moreAccess := d.accessRepos(v)
	for i, r := range access {
		if i == 0 {
			b.WriteString("\n#### Access\n\n")
		}
		fmt.Fprintf(b, "- `%s`\n", r.Repo)
		for _, l := range r.accessLines() {
			fmt.Fprintf(b, "  - %s\n", mdEscape(l))
		}
	}
	if moreAccess > 0 {
		fmt.Fprintf(b, "- and %d more %s with access changes or errors\n", moreAccess, plural(moreAccess, "repo", "repos"))
	}
	folded, moreFolded := v.limitFolded(FoldRepoWarnings(d.Repos))
	if len(folded) > 0 {
		b.WriteString("\n#### Warnings\n\n")
		for _, f := range folded {
			fmt.Fprintf(b, "- %s (%s)\n", mdEscape(f.Text), mdEscape(f.Where()))
		}
	}
	if moreFolded > 0 {
		fmt.Fprintf(b, "- and %d more %s\n", moreFolded, plural(moreFolded, "warning", "warnings"))
	}
	files := d.Repos
	if v.Limit > 0 {
		files = rows
	}
	for _, r := range files {
		if len(r.Files.List) == 0 || !r.Writes {
			continue
		}
		fmt.Fprintf(b, "\n<details><summary><code>%s</code>: %d files</summary>\n\n", r.Repo, len(r.Files.List))
		for _, f := range r.Files.List {
			fmt.Fprintf(b, "- %s `%s`\n", f.Op, f.Path)
		}
		b.WriteString("\n</details>\n")
	}
}

// accessRepos are the repos with access lines (drift, a refusal, CODEOWNERS errors), at most
// v.Limit of them, and how many more there are.
func (d *Document) accessRepos(v View) ([]Repo, int) {
	var out []Repo
	more := 0
	for _, r := range d.Repos {
		if len(r.accessLines()) == 0 {
			continue
		}
		if v.Limit > 0 && len(out) == v.Limit {
			more++
			continue
		}
		out = append(out, r)
	}
	return out, more
}

// mdEscape keeps a cell of a Markdown table one cell: pipes escaped, newlines joined.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
