package status

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// Filter selects rows. The zero Filter selects every row.
type Filter struct {
	// Selector is a Kubernetes label selector on the cluster's (or workspace's) labels
	// ("env=prod,region in (eu,us)"); nil selects every row.
	Selector labels.Selector
	// Blocked keeps only the rows blocked on a human.
	Blocked bool
	// Repos keeps only these repos ("owner/name" or name, any case); empty keeps all.
	Repos []string
	// States keeps only rows in these states; empty keeps all.
	States []State
	// Group keeps only one group ("" keeps all).
	Group string
	// Wave keeps only the cluster repos of one rollout wave (Fleet.Waves names; "" keeps all).
	Wave string
	// Text keeps rows whose repo, group, wave, summary or provisioned clusters contain it
	// (any case).
	Text string
}

// ParseSelector parses a --selector value with Kubernetes' own parser.
func ParseSelector(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w (want a Kubernetes label selector, for example env=prod,region in (eu,us))", s, err)
	}
	return sel, nil
}

// Empty reports whether the filter selects every row.
func (fl Filter) Empty() bool {
	return (fl.Selector == nil || fl.Selector.Empty()) && !fl.Blocked && len(fl.Repos) == 0 && len(fl.States) == 0 &&
		fl.Group == "" && fl.Wave == "" && fl.Text == ""
}

// Match reports whether a row passes the filter, reading Filter.Wave against the row's Wave.
// Fleet.Filtered also matches AllClusters, the one bar of a fleet with no waves declared.
func (fl Filter) Match(r *Repo) bool { return fl.match(r, r.Wave) }

func (fl Filter) match(r *Repo, waveName string) bool {
	if fl.Selector != nil && !fl.Selector.Empty() && !fl.Selector.Matches(labels.Set(r.Labels)) {
		return false
	}
	if fl.Blocked && r.State != StateBlocked {
		return false
	}
	if len(fl.Repos) > 0 && !slices.ContainsFunc(fl.Repos, func(n string) bool {
		return strings.EqualFold(n, r.Repo) || strings.EqualFold(n, repoName(r.Repo))
	}) {
		return false
	}
	if len(fl.States) > 0 && !slices.Contains(fl.States, r.State) {
		return false
	}
	if fl.Group != "" && fl.Group != r.Group {
		return false
	}
	if fl.Wave != "" && fl.Wave != waveName {
		return false
	}
	if fl.Text != "" {
		q := strings.ToLower(fl.Text)
		if !strings.Contains(strings.ToLower(r.Repo), q) && !strings.Contains(strings.ToLower(r.Group), q) &&
			!strings.Contains(strings.ToLower(r.Wave), q) && !strings.Contains(strings.ToLower(r.Summary), q) &&
			!slices.ContainsFunc(r.Provisions, func(c string) bool { return strings.Contains(strings.ToLower(c), q) }) {
			return false
		}
	}
	return true
}

// Filtered returns the view of the rows the filter selects, its summary and groups counted
// over those rows only. The receiver is not changed.
func (f *Fleet) Filtered(fl Filter) *Fleet {
	if fl.Empty() {
		return f
	}
	out := *f
	out.Repos = make([]Repo, 0, len(f.Repos))
	for i := range f.Repos {
		if fl.match(&f.Repos[i], f.waveOf(&f.Repos[i])) {
			out.Repos = append(out.Repos, f.Repos[i])
		}
	}
	out.Summary = summarize(out.Repos)
	out.Summary.Line = withRun(f.Run, out.Summary.Line)
	out.Groups = groups(out.Repos)
	out.Waves = waveBars(&f.waves, out.Repos, false)
	return &out
}

// UnknownRepos returns the names of fl.Repos that match no row of f, so a typo in --repo is
// an error rather than an empty table.
func (f *Fleet) UnknownRepos(fl Filter) []string {
	var out []string
	for _, n := range fl.Repos {
		if f.Find(n) == nil {
			out = append(out, n)
		}
	}
	return out
}

// waveOf is the wave bar a row counts in ("" none): its Wave, or AllClusters.
func (f *Fleet) waveOf(r *Repo) string {
	if r.Kind != string(fanout.KindCluster) {
		return ""
	}
	return f.waves.WaveOf(r.Name)
}
