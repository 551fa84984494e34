package report

import (
	"fmt"
	"io"
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
	if r.Files.Added+r.Files.Changed+r.Files.Removed > 0 {
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

func (r Repo) filesCell() string {
	return fmt.Sprintf("+%d ~%d -%d", r.Files.Added, r.Files.Changed, r.Files.Removed)
}

func (r Repo) objectsCell() string {
	if len(r.Objects) == 0 {
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

// WriteText writes the summary table for a terminal.
func (d *Document) WriteText(w io.Writer) error {
	if len(d.Errors) > 0 {
		return d.writeErrorsText(w)
	}
	if len(d.Repos) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPO\tKIND\tACTION\tPR\tFILES\tOBJECTS\tDETAIL")
		for _, r := range d.Repos {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Repo, r.Kind, r.Action, r.prCell(), r.filesCell(), r.objectsCell(), r.detail())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d repos: %s", len(d.Repos), d.counts())
	if d.Source != "" {
		fmt.Fprintf(w, " (source %s)", ShortSHA12(d.Source))
	}
	fmt.Fprintln(w)
	if d.Scope != "" {
		fmt.Fprintf(w, "Scope: %s\n", d.Scope)
	}
	first := true
	for _, r := range d.Repos {
		lines := r.accessLines()
		if len(lines) == 0 {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nAccess:")
			first = false
		}
		fmt.Fprintf(w, "  %s\n", r.Repo)
		for _, l := range lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	if d.Refused != "" {
		if _, err := fmt.Fprintf(w, "REFUSED: %s\n", d.Refused); err != nil {
			return err
		}
	}
	return nil
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

// WriteMarkdown writes the summary for a pull-request comment or an Action step summary.
func (d *Document) WriteMarkdown(w io.Writer) error {
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
	if len(d.Repos) > 0 {
		b.WriteString("| repo | kind | action | PR | files | objects | detail |\n|---|---|---|---|---|---|---|\n")
	}
	for _, r := range d.Repos {
		act := r.Action
		if r.Error != nil || r.Action == ActionDeferred {
			act = "**" + act + "**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", r.Repo, r.Kind, act, r.prCell(),
			r.filesCell(), r.objectsCell(), mdEscape(r.detail()))
	}
	first := true
	for _, r := range d.Repos {
		lines := r.accessLines()
		if len(lines) == 0 {
			continue
		}
		if first {
			b.WriteString("\n#### Access\n\n")
			first = false
		}
		fmt.Fprintf(&b, "- `%s`\n", r.Repo)
		for _, l := range lines {
			fmt.Fprintf(&b, "  - %s\n", mdEscape(l))
		}
	}
	for _, r := range d.Repos {
		if len(r.Files.List) == 0 || !r.Writes {
			continue
		}
		fmt.Fprintf(&b, "\n<details><summary><code>%s</code>: %d files</summary>\n\n", r.Repo, len(r.Files.List))
		for _, f := range r.Files.List {
			fmt.Fprintf(&b, "- %s `%s`\n", f.Op, f.Path)
		}
		b.WriteString("\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps a cell of a Markdown table one cell: pipes escaped, newlines joined.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
