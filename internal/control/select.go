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
	dp := r.deployer()
	out := make([]Deployment, 0, len(r.Clusters)*(len(dp.comps)+1))
	for _, c := range r.Clusters {
		out = dp.cluster(c, out, true)
	}
	return out
}

// deployer holds what listing a cluster's deployments needs from the platform and the
// workspaces, worked out once for all clusters: the components' selectors compiled, apps and
// workspaces looked up, entry positions formatted. Compiling a selector per cluster and
// component was a tenth of a large fleet's render.
type deployer struct {
	r     *Repo
	comps []entryPlan
	// workspaces by name (the first of a name, as Repo.Workspace), and their entries, made on
	// first use.
	workspaces map[string]*Workspace
	entries    map[*Workspace][]entryPlan
	apps       map[string]*App
}

// entryPlan is one component or workspace entry whose app exists.
type entryPlan struct {
	app    *App
	sel    labels.Selector // components only
	values Values
	src    Position
}

func (r *Repo) deployer() *deployer {
	dp := &deployer{r: r, workspaces: map[string]*Workspace{}, entries: map[*Workspace][]entryPlan{}, apps: map[string]*App{}}
	for _, a := range r.Apps {
		if _, ok := dp.apps[a.Metadata.Name]; !ok {
			dp.apps[a.Metadata.Name] = a
		}
	}
	for _, w := range r.Workspaces {
		if _, ok := dp.workspaces[w.Metadata.Name]; !ok {
			dp.workspaces[w.Metadata.Name] = w
		}
	}
	if p := r.Platform; p != nil {
		for i, comp := range p.Spec.Components {
			a := dp.apps[comp.App]
			if a == nil || comp.ClusterSelector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(comp.ClusterSelector.LabelSelector())
			if err != nil {
				continue
			}
			dp.comps = append(dp.comps, entryPlan{app: a, sel: sel, values: comp.Values,
				src: p.Source.At(fmt.Sprintf("spec.components.%d", i))})
		}
	}
	return dp
}

// Deployer lists deployments one cluster at a time, in the order of Deployments, for
// callers that work cluster by cluster: each deployment carries its own resolved values, so
// holding the whole list of a 10,000-cluster fleet costs tens of MB that a cluster-by-cluster
// caller can drop as it goes. Selectors are compiled once, when the Deployer is made. A
// Deployer is not safe for concurrent use; it reads the Repo as it was when made.
type Deployer struct{ dp *deployer }

// Deployer returns a Deployer of the repo's deployments.
func (r *Repo) Deployer() *Deployer { return &Deployer{dp: r.deployer()} }

// Components lists the platform components cluster c runs, by app name: the first part of
// c's deployments in Deployments.
func (d *Deployer) Components(c *Cluster) []Deployment {
	return d.dp.components(c, nil, true)
}

// WorkspaceApps lists the apps c runs for its workspace, by app name: the rest of c's
// deployments in Deployments.
func (d *Deployer) WorkspaceApps(c *Cluster) []Deployment {
	return d.dp.workspaceApps(c, nil, true)
}

// cluster appends the deployments of c to out, in Deployments order. With merge false, a
// deployment's Values are not resolved but are its entry's own values (shared, read-only):
// enough for the validator, which would otherwise build every map twice.
func (dp *deployer) cluster(c *Cluster, out []Deployment, merge bool) []Deployment {
	return dp.workspaceApps(c, dp.components(c, out, merge), merge)
}

// components appends the platform components of c to out, by app name.
func (dp *deployer) components(c *Cluster, out []Deployment, merge bool) []Deployment {
	start := len(out)
	set := labels.Set(c.Metadata.Labels)
	for _, e := range dp.comps {
		if !e.sel.Matches(set) {
			continue
		}
		out = append(out, Deployment{
			Cluster: c, App: e.app,
			Values: dp.values(e, c, merge),
			Source: e.src,
		})
	}
	sortByApp(out[start:])
	return out
}

// workspaceApps appends the apps of c's workspace to out, by app name.
func (dp *deployer) workspaceApps(c *Cluster, out []Deployment, merge bool) []Deployment {
	w := dp.workspaces[c.Spec.Workspace]
	if w == nil || c.Spec.Workspace == "" {
		return out
	}
	entries, ok := dp.entries[w]
	if !ok {
		for i, ref := range w.Spec.Apps {
			a := dp.apps[ref.App]
			if a == nil || a.Spec.Scope == ScopeCluster {
				continue
			}
			entries = append(entries, entryPlan{app: a, values: ref.Values, src: w.Source.At(fmt.Sprintf("spec.apps.%d", i))})
		}
		// By app name once per workspace, not once per cluster: a stable sort of the same
		// entries gives every cluster the order sorting its deployments would.
		sort.SliceStable(entries, func(i, j int) bool { return entries[i].app.Metadata.Name < entries[j].app.Metadata.Name })
		dp.entries[w] = entries
	}
	for _, e := range entries {
		out = append(out, Deployment{
			Cluster: c, App: e.app, Workspace: w,
			Values: dp.values(e, c, merge),
			Source: e.src,
		})
	}
	return out
}

// sortByApp sorts deployments by app name, keeping the order of equal names.
func sortByApp(ds []Deployment) {
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].App.Metadata.Name < ds[j].App.Metadata.Name })
}

func (dp *deployer) values(e entryPlan, c *Cluster, merge bool) map[string]string {
	if !merge {
		return e.values
	}
	return mergeValues(e.app, e.values, c.Spec.Values)
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
