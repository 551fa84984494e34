package control

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelSelector converts s to the Kubernetes type, so callers get real
// Kubernetes semantics and validation.
func (s *Selector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	ls := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      r.Key,
			Operator: metav1.LabelSelectorOperator(r.Operator),
			Values:   r.Values,
		})
	}
	return ls
}

// Matches reports whether a cluster with these labels is selected, with
// Kubernetes label-selector semantics: a nil selector selects nothing, an
// empty one selects everything. An invalid selector is an error.
func (s *Selector) Matches(set map[string]string) (bool, error) {
	if s == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector())
	if err != nil {
		return false, fmt.Errorf("invalid cluster selector: %w", err)
	}
	return sel.Matches(labels.Set(set)), nil
}

// Deployment is one catalog app on one cluster, with its values resolved.
type Deployment struct {
	Cluster *Cluster
	App     *App
	// Workspace is the workspace deploying the app, nil for platform
	// components.
	Workspace *Workspace
	// Values are the app's declared values, merged with precedence
	// app default < component or workspace entry < cluster spec.values.
	// Required values that nobody set are absent (Validate reports them).
	Values map[string]string
	// Source is the component or workspace entry that asked for the app.
	Source Position
}

// Deployments lists every (cluster, app) pair the control repo asks for,
// sorted by cluster, then platform components before workspace apps, then
// app name. Entries whose app, workspace or selector is invalid are skipped;
// Validate reports them.
func (r *Repo) Deployments() []Deployment {
	var out []Deployment
	for _, c := range r.Clusters {
		out = append(out, r.clusterDeployments(c)...)
	}
	return out
}

// clusterDeployments lists the deployments of one cluster in Deployments
// order.
func (r *Repo) clusterDeployments(c *Cluster) []Deployment {
	var out []Deployment
	if p := r.Platform; p != nil {
		for i, comp := range p.Spec.Components {
			a := r.App(comp.App)
			if a == nil {
				continue
			}
			if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err != nil || !ok {
				continue
			}
			out = append(out, Deployment{
				Cluster: c, App: a,
				Values: mergeValues(a, comp.Values, c.Spec.Values),
				Source: p.Source.At(fmt.Sprintf("spec.components.%d", i)),
			})
		}
	}
	if w := r.Workspace(c.Spec.Workspace); w != nil && c.Spec.Workspace != "" {
		for i, ref := range w.Spec.Apps {
			a := r.App(ref.App)
			if a == nil || a.Spec.Scope == ScopeCluster {
				continue
			}
			out = append(out, Deployment{
				Cluster: c, App: a, Workspace: w,
				Values: mergeValues(a, ref.Values, c.Spec.Values),
				Source: w.Source.At(fmt.Sprintf("spec.apps.%d", i)),
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Workspace == nil) != (b.Workspace == nil) {
			return a.Workspace == nil
		}
		return a.App.Metadata.Name < b.App.Metadata.Name
	})
	return out
}

// mergeValues resolves an app's declared values: default < entry < cluster.
func mergeValues(a *App, entry, cluster Values) map[string]string {
	out := make(map[string]string, len(a.Spec.Values))
	for name, spec := range a.Spec.Values {
		if spec.Default != nil {
			out[name] = *spec.Default
		}
		if v, ok := entry[name]; ok {
			out[name] = v
		}
		if v, ok := cluster[name]; ok {
			out[name] = v
		}
	}
	return out
}

// ClusterRepo is the name of the cluster's target repo (spec.repos.cluster
// with {name} replaced).
func (r *Repo) ClusterRepo(name string) string {
	return expandRepo(r.Fleet().ClusterRepo, name)
}

// WorkspaceRepo is the name of the workspace's target repo
// (spec.repos.workspace with {name} replaced).
func (r *Repo) WorkspaceRepo(name string) string {
	return expandRepo(r.Fleet().WorkspaceRepo, name)
}

func expandRepo(pattern, name string) string {
	return strings.ReplaceAll(pattern, "{name}", name)
}
