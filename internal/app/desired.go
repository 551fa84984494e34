package app

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/manifest"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// DesiredPlan is the plan without a forge: the desired state of every target repo.
type DesiredPlan struct {
	Source string               `json:"source,omitempty"`
	Repos  []report.DesiredRepo `json:"repos"`
}

// BuildDesiredPlan summarises f per target repo: files, objects per kind, access, reviewers.
func BuildDesiredPlan(f *Fleet) (DesiredPlan, error) {
	p := DesiredPlan{Source: f.Repo.Revision, Repos: []report.DesiredRepo{}}
	for _, t := range f.Targets {
		d := report.DesiredRepo{
			Repo: t.FullName(), Kind: string(t.Kind), Name: t.Name,
			Files: slices.Sorted(maps.Keys(t.Files)), Scaffolds: slices.Sorted(maps.Keys(t.Scaffolds)),
			Teams: map[string]string{}, Reviewers: t.Reviewers,
		}
		var objs []manifest.Object
		// components holds the objects of each platform component (platform/<app>/).
		components := map[string][]manifest.Object{}
		for _, path := range d.Files {
			if !manifest.IsManifestPath(path) {
				continue
			}
			o, err := manifest.Parse(t.Files[path])
			if err != nil {
				return p, fmt.Errorf("%s: rendered %s does not parse: %w", t.FullName(), path, err)
			}
			objs = append(objs, o...)
			if app, ok := fanout.ComponentOfPath(path); ok && t.Kind == fanout.KindCluster {
				components[app] = append(components[app], o...)
			}
		}
		for app, o := range components {
			var provided []manifest.Object
			for _, dep := range f.Repo.DependencyClosure(app) {
				provided = append(provided, components[dep]...)
			}
			if needs := manifest.NeedsFromCluster(o, provided); len(needs) > 0 {
				if d.Needs == nil {
					d.Needs = map[string][]string{}
				}
				d.Needs[app] = needs
			}
		}
		d.Objects = manifest.CountByKind(manifest.OnCluster(objs))
		for team, role := range t.Access.Teams {
			d.Teams[team] = string(role)
		}
		p.Repos = append(p.Repos, d)
	}
	return p, nil
}

// FormatTeams writes a repo's access as "team=role, ..." in team order.
func FormatTeams(teams map[string]string) string {
	parts := make([]string, 0, len(teams))
	for _, t := range slices.Sorted(maps.Keys(teams)) {
		parts = append(parts, t+"="+teams[t])
	}
	return strings.Join(parts, ", ")
}
