package review

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "fleetbot check control: %s..%s by %s\n", short(r.Base), short(r.Head), orNone(r.Author))
	fmt.Fprintf(&b, "verdict: %s\n", strings.ToUpper(r.Verdict))
	for _, reason := range r.Reasons {
		fmt.Fprintf(&b, "  - %s\n", reason)
	}
	if len(r.Issues) > 0 {
		fmt.Fprintf(&b, "\n%s\n", r.Issues.Error())
	}
	if r.MembershipUnknown {
		b.WriteString("\nauthor's teams: unknown (pass --author-teams, or --forge github to look them up)\n")
	} else {
		teams := strings.Join(r.AuthorTeams, ", ")
		if teams == "" {
			// Known, and in none of the teams the changed paths' rules consult.
			teams = "none of the teams this change needs"
		}
		fmt.Fprintf(&b, "\nauthor's teams: %s\n", teams)
	}
	b.WriteString("\ncontrol repo changes:\n")
	if len(r.Files) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, f := range r.Files {
		mark := "ok  "
		if !f.Allowed {
			mark = "NO  "
		}
		fmt.Fprintf(&b, "  %s%-8s %s  [%s] %s\n", mark, f.Op, f.Path, f.Owner, f.Reason)
	}
	b.WriteString("\ntarget repos:\n")
	if len(r.Targets) == 0 {
		b.WriteString("  (none: the render of every target repo is unchanged)\n")
	}
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "  %s (%s %s): %s\n", t.Repo, t.Kind, t.Name, t.Op)
		for _, f := range t.Files {
			fmt.Fprintf(&b, "      %s\n", f)
		}
		for _, a := range t.Access {
			fmt.Fprintf(&b, "      access: %s\n", a)
		}
		for _, p := range t.Personas {
			fmt.Fprintf(&b, "      reaches: %s\n", p)
		}
	}
	if len(r.Personas) > 0 {
		fmt.Fprintf(&b, "\npersonas affected: %s\n", strings.Join(r.Personas, "; "))
	}
	fmt.Fprintf(&b, "\n%s\n", r.SummaryLine())
	_, err := io.WriteString(w, b.String())
	return err
}

// SummaryLine says the review in one line, the last of its text: the verdict, the control repo
// files changed (and how many the author's teams may not change alone), the target repos reached.
func (r *Report) SummaryLine() string {
	refused := 0
	for _, f := range r.Files {
		if !f.Allowed {
			refused++
		}
	}
	s := fmt.Sprintf("verdict %s: %d control repo %s changed", strings.ToUpper(r.Verdict), len(r.Files), plural(len(r.Files), "file", "files"))
	if refused > 0 {
		s += fmt.Sprintf(" (%d the author may not change alone)", refused)
	}
	s += fmt.Sprintf(", %d target %s reached", len(r.Targets), plural(len(r.Targets), "repo", "repos"))
	if len(r.Issues) > 0 {
		s += fmt.Sprintf(", %d problem(s) in the head", len(r.Issues))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WriteMarkdown writes the report for a PR comment or a job summary.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	icon := map[string]string{Allowed: "✅", NeedsPlatformAdmin: "⚠️", Invalid: "❌"}[r.Verdict]
	fmt.Fprintf(&b, "### fleetbot check control — %s %s\n\n", icon, r.Verdict)
	fmt.Fprintf(&b, "`%s`..`%s` by @%s", short(r.Base), short(r.Head), orNone(r.Author))
	if r.MembershipUnknown {
		b.WriteString(" (teams unknown)")
	} else if len(r.AuthorTeams) > 0 {
		fmt.Fprintf(&b, " (teams: %s)", strings.Join(r.AuthorTeams, ", "))
	}
	b.WriteString("\n\n")
	for _, reason := range r.Reasons {
		fmt.Fprintf(&b, "- %s\n", md(reason))
	}
	if len(r.Issues) > 0 {
		b.WriteString("\n#### Problems\n\n")
		for _, is := range r.Issues {
			fmt.Fprintf(&b, "- `%s`: %s", is.Pos, md(is.Message))
			if is.Hint != "" {
				fmt.Fprintf(&b, " — %s", md(is.Hint))
			}
			b.WriteString("\n")
		}
	}
	if len(r.Files) > 0 {
		b.WriteString("\n| | change | path | needs | why |\n|---|---|---|---|---|\n")
		for _, f := range r.Files {
			mark := "✅"
			if !f.Allowed {
				mark = "⚠️"
			}
			fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s |\n", mark, f.Op, f.Path, md(f.Owner), md(f.Reason))
		}
	}
	if len(r.Targets) > 0 {
		b.WriteString("\n| target repo | change | files | access | reaches |\n|---|---|---|---|---|\n")
		for _, t := range r.Targets {
			fmt.Fprintf(&b, "| `%s` | %s | %d | %s | %s |\n", t.Repo, t.Op, len(t.Files), md(orDash(strings.Join(t.Access, "; "))), md(orDash(strings.Join(t.Personas, "; "))))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func md(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func short(s string) string {
	return orNone(report.ShortSHA(s))
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
