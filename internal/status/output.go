package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// WriteJSON writes the view as fleetbot's one JSON report (internal/report): the document of
// command "status", one entry per shown repo in "repos" with where it stands in its status,
// and the view's summary, groups and waves in "status".
func (f *Fleet) WriteJSON(w io.Writer) error { return f.Document().WriteJSON(w) }

// Document is the view as the report every command shares: each row once, as the report's
// repo entry (its result, credentials in URLs scrubbed as on the page) with the row's status;
// the view's summary, groups and waves as the status section.
func (f *Fleet) Document() *report.Document {
	rows := make([]report.Repo, 0, len(f.Repos))
	for i := range f.Repos {
		r := &f.Repos[i]
		row := report.Repo{Repo: r.Repo, Kind: r.Kind, Name: r.Name, Action: report.ActionNone}
		if res := r.result; res != nil {
			row = res.Row()
		}
		row.Reason, row.Blocked, row.Deferred = scrub(row.Reason), scrub(row.Blocked), scrub(row.Deferred)
		if row.Error != nil {
			e := *row.Error
			e.Message = scrub(e.Message)
			row.Error = &e
		}
		row.Status = r.reportStatus()
		rows = append(rows, row)
	}
	d := report.New(report.CommandStatus, f.Source, rows)
	d.Status = f
	return d
}

// reportStatus is the row as the report's RepoStatus.
func (r *Repo) reportStatus() *report.RepoStatus {
	s := &report.RepoStatus{State: string(r.State), Segment: r.Segment, Summary: r.Summary, Labels: r.Labels, Group: r.Group,
		Wave: r.Wave, Provisions: r.Provisions, ProvisionedBy: r.ProvisionedBy, URL: r.URL, Revision: r.Revision, Merged: r.Merged,
		WaitingOn: r.WaitingOn, Health: r.Health, Failing: r.Failing, Drift: r.Drift, CheckedAt: r.CheckedAt}
	if p := r.PR; p != nil {
		s.PR = &report.OpenPR{Number: p.Number, URL: p.URL, Opened: p.Opened, AgeSeconds: p.AgeSeconds, Source: p.Source,
			Review: p.Review, Checks: p.Checks}
	}
	return s
}

// WriteText writes the view for a terminal: a table, one row per repo (a WAVE column when the
// control repo declares rollout waves), the clusters each management repo provisions, the
// rollout per wave, the repos that need attention, then the summary.
func (f *Fleet) WriteText(w io.Writer) error {
	src := "unknown"
	if f.Source != "" {
		src = report.ShortSHA(f.Source)
	}
	fmt.Fprintf(w, "fleetbot status of control revision %s\n\n", src)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// The WAVE column shows only when the control repo declares rollout waves.
	waves := f.waves.Declared()
	head := "REPO\tKIND\tLABELS\tSTATE\tREVISION\tPR\tAGE\tWAITING ON\tMERGED\tHEALTH\tDRIFT"
	if waves {
		head = "REPO\tKIND\tLABELS\tWAVE\tSTATE\tREVISION\tPR\tAGE\tWAITING ON\tMERGED\tHEALTH\tDRIFT"
	}
	fmt.Fprintln(tw, head)
	for i := range f.Repos {
		r := &f.Repos[i]
		prCell, age := "-", "-"
		if r.PR != nil {
			prCell = fmt.Sprintf("#%d", r.PR.Number)
			age = dash(r.PR.Age())
		}
		wave := ""
		if waves {
			wave = dash(r.Wave) + "\t"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Repo, r.Kind, dash(LabelsString(r.Labels)), wave, r.State,
			dash(report.ShortSHA(r.Revision)), prCell, age, dash(r.WaitingOn), dash(report.ShortSHA(r.Merged)), r.Health, dash(strings.Join(r.Drift, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var mgmt []string
	for i := range f.Repos {
		if r := &f.Repos[i]; r.Kind == string(fanout.KindManagement) {
			held := "no cluster"
			if len(r.Provisions) > 0 {
				held = strings.Join(r.Provisions, ", ")
			}
			mgmt = append(mgmt, fmt.Sprintf("  %s: %s", r.Repo, held))
		}
	}
	if len(mgmt) > 0 {
		fmt.Fprintf(w, "\nProvisioned clusters by management repo:\n%s\n", strings.Join(mgmt, "\n"))
	}
	if len(f.Waves) > 0 {
		fmt.Fprintln(w, "\nRollout:")
		for i := range f.Waves {
			fmt.Fprintf(w, "  %s\n", f.Waves[i].Label())
		}
	}
	if f.Window != nil {
		fmt.Fprintf(w, "\n%s\n", strings.ToUpper(f.Window.Sentence()[:1])+f.Window.Sentence()[1:])
	}
	if f.Rollback != nil {
		fmt.Fprintf(w, "\n%s\n", f.Rollback.Sentence())
	}
	var notes []string
	for i := range f.Repos {
		r := &f.Repos[i]
		if r.State == StateUnhealthy || r.State == StateBlocked || r.State == StateFailed || r.State == StateDeferred {
			notes = append(notes, fmt.Sprintf("  %s: %s", r.Repo, r.Summary))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nNeeds attention:\n%s\n", strings.Join(notes, "\n"))
	}
	_, err := fmt.Fprintf(w, "\n%s\n", f.Summary.Line)
	return err
}

// LabelsString writes labels as a selector would: "env=prod,region=eu", sorted.
func LabelsString(l map[string]string) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
