package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// DesiredRepo is the offline plan of one target repo (plan without --forge): what fleetbot
// would propose, without asking the forge what is there.
type DesiredRepo struct {
	Repo string `json:"repo"`
	// Kind is cluster, workspace or management.
	Kind      string            `json:"kind"`
	Name      string            `json:"name"`
	Files     []string          `json:"files"`
	Scaffolds []string          `json:"scaffolds"`
	Objects   map[string]int    `json:"objects"`
	Teams     map[string]string `json:"teams"`
	Reviewers []string          `json:"reviewers"`
	// Needs lists, per platform component of a cluster repo, the kinds (Kind.group) whose
	// CRDs the cluster must already have: neither Kubernetes nor the component or what it
	// depends on provides them.
	Needs map[string][]string `json:"needs,omitempty"`
}

// ObjectCounts is "Deployment×2, Service×1" (sorted by kind), "" for none.
func (r DesiredRepo) ObjectCounts() string {
	parts := make([]string, 0, len(r.Objects))
	for _, k := range slices.Sorted(maps.Keys(r.Objects)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, r.Objects[k]))
	}
	return strings.Join(parts, ", ")
}

// objectTotal is how many objects the repo holds.
func (r DesiredRepo) objectTotal() int {
	n := 0
	for _, c := range r.Objects {
		n += c
	}
	return n
}

// TeamRoles is "payments-sre=push, platform=admin" (sorted by team), "" for none.
func (r DesiredRepo) TeamRoles() string {
	parts := make([]string, 0, len(r.Teams))
	for _, t := range slices.Sorted(maps.Keys(r.Teams)) {
		parts = append(parts, t+"="+r.Teams[t])
	}
	return strings.Join(parts, ", ")
}

// needsLine is what a component's needs mean for the cluster.
func needsLine(component string, kinds []string) string {
	return fmt.Sprintf("%s: %s from the cluster (neither it nor a component it depends on renders the CRD; until the cluster has it, Kustomization platform-%s fails, and what depends on it waits)",
		component, strings.Join(kinds, ", "), component)
}

// WriteDesiredText writes an offline plan for a terminal, without its summary line (a caller
// may add what it knows beside it, such as the rollout's waves, then DesiredSummaryLine). With
// v.Detail every repo is listed with its files, needs, access and reviewers; without it, one
// row per repo, then what the clusters must provide, folded by component.
func (d *Document) WriteDesiredText(w io.Writer, v View) error {
	var b strings.Builder
	if v.Detail {
		for i, r := range d.Desired {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s  (%s %s)\n", r.Repo, r.Kind, r.Name)
			fmt.Fprintf(&b, "  files:    %d managed, %d scaffold\n", len(r.Files), len(r.Scaffolds))
			for _, f := range r.Files {
				fmt.Fprintf(&b, "            %s\n", f)
			}
			fmt.Fprintf(&b, "  objects:  %s\n", r.ObjectCounts())
			for _, c := range slices.Sorted(maps.Keys(r.Needs)) {
				fmt.Fprintf(&b, "  needs:    %s\n", needsLine(c, r.Needs[c]))
			}
			fmt.Fprintf(&b, "  access:   %s\n", r.TeamRoles())
			fmt.Fprintf(&b, "  review:   %s\n", strings.Join(r.Reviewers, ", "))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if len(d.Desired) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPO\tKIND\tFILES\tSCAFFOLDS\tOBJECTS\tACCESS\tNEEDS")
		for _, r := range d.Desired {
			needs := "-"
			if len(r.Needs) > 0 {
				needs = strings.Join(slices.Sorted(maps.Keys(r.Needs)), ", ")
			}
			access := r.TeamRoles()
			if access == "" {
				access = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Repo, r.Kind, len(r.Files), len(r.Scaffolds), r.objectTotal(), access, needs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var texts, at []string
	for _, r := range d.Desired {
		for _, c := range slices.Sorted(maps.Keys(r.Needs)) {
			texts, at = append(texts, needsLine(c, r.Needs[c])), append(at, r.Repo)
		}
	}
	if folded := Fold(texts, at, "repos"); len(folded) > 0 {
		b.WriteString("\nNeeds (CRDs the cluster must already have):\n")
		for _, f := range folded {
			fmt.Fprintf(&b, "  %s [%s]\n", f.Text, f.Where())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DesiredSummaryLine says an offline plan in one line: the repos per kind, their files and
// objects, the source, and how to see more.
func (d *Document) DesiredSummaryLine(v View) string {
	kinds := map[string]int{}
	files, scaffolds, objects := 0, 0, 0
	for _, r := range d.Desired {
		kinds[r.Kind]++
		files, scaffolds, objects = files+len(r.Files), scaffolds+len(r.Scaffolds), objects+r.objectTotal()
	}
	var parts []string
	for _, k := range []string{"cluster", "workspace", "management"} {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	src := d.Source
	if src == "" {
		src = "working tree (not a git checkout)"
	} else {
		src = ShortSHA12(src)
	}
	s := fmt.Sprintf("%d target %s", len(d.Desired), plural(len(d.Desired), "repo", "repos"))
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	s += fmt.Sprintf(": %d managed files, %d scaffolds, %d objects; desired state of %s, offline: --forge diffs against the target repos", files, scaffolds, objects, src)
	if !v.Detail {
		s += ", --detail lists every file"
	}
	return s
}

// WriteDesiredMarkdown writes an offline plan for a pull-request comment or a step summary.
func (d *Document) WriteDesiredMarkdown(w io.Writer) error {
	var b strings.Builder
	src := d.Source
	if src == "" {
		src = "working tree (not a git checkout)"
	}
	fmt.Fprintf(&b, "### fleetbot plan (desired state)\n\nSource: `%s`\n\n%s\n\n", src, mdEscape(d.DesiredSummaryLine(View{Detail: true})))
	b.WriteString("| repo | kind | files | objects | access |\n|---|---|---|---|---|\n")
	for _, r := range d.Desired {
		fmt.Fprintf(&b, "| `%s` | %s | %d managed, %d scaffold | %s | %s |\n", r.Repo, r.Kind,
			len(r.Files), len(r.Scaffolds), r.ObjectCounts(), r.TeamRoles())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
