package webhook

import (
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// reports is the service's retained state behind app.Reports.
type reports struct {
	source  string
	control *app.ControlRepo
	repos   map[string]app.RepoReport // by lower-case "owner/name"
}

// keep records the results of an apply at sha. A run over the whole fleet replaces every
// result (a repo that left the control repo leaves the reports too); a run limited to some repos
// (a drift or incremental apply) replaces theirs only.
func (s *Service) keep(sha string, repo *app.ControlRepo, rep *app.Result, full bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.reports
	r.source, r.control = sha, repo
	if full || r.repos == nil {
		r.repos = map[string]app.RepoReport{}
	}
	if rep == nil {
		return
	}
	for _, res := range rep.Results {
		r.repos[strings.ToLower(res.Repo)] = app.RepoReport{Result: res, Source: firstOf(rep.Source, sha), At: now}
	}
}

// Reports returns the newest result of every target repo, as of the service's last applies.
func (s *Service) Reports() app.Reports {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := app.Reports{Source: s.reports.source, Control: s.reports.control, Repos: make([]app.RepoReport, 0, len(s.reports.repos))}
	for _, r := range s.reports.repos {
		out.Repos = append(out.Repos, r)
	}
	sortReports(out.Repos)
	return out
}

func sortReports(rs []app.RepoReport) {
	sort.Slice(rs, func(a, b int) bool { return rs[a].Result.Repo < rs[b].Result.Repo })
}
