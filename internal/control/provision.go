package control

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Deletion policies of a provisioned cluster (spec.provision.deletionPolicy).
const (
	// DeletionRetain (the default) orphans the cluster's infrastructure when
	// the cluster leaves the control repo: its HelmRelease carries
	// kustomize.toolkit.fluxcd.io/prune: disabled, so Flux on the management
	// cluster does not delete it and Cluster API destroys nothing.
	DeletionRetain = "Retain"
	// DeletionDelete lets the removal of the cluster delete its HelmRelease,
	// which uninstalls the chart: Cluster API then destroys the machines.
	DeletionDelete = "Delete"
)

// Defaults of the management repos.
const (
	// DefaultManagementRepo is the repo name pattern of a management cluster's
	// repo when its entry names none; {name} is the management cluster's name.
	DefaultManagementRepo = "mgmt-{name}"
	// DefaultProvisionNamespace is the namespace, on the management cluster,
	// of the HelmReleases, chart sources and hub Kustomizations.
	DefaultProvisionNamespace = "fleetbot-clusters"
)

// Typed value names a profile may list under required.
const (
	ValueKubernetesVersion = "kubernetesVersion"
	ValueRegion            = "region"
	ValueNodePools         = "nodePools"
)

// ManagementCluster is a cluster running Cluster API and Flux, on which
// fleetbot provisions workload clusters through its management repo.
type ManagementCluster struct {
	// Name identifies the management cluster in spec.provision.managementCluster.
	Name string `yaml:"name" json:"name"`
	// Repo is the management repo name (a repo of spec.owner) or a pattern
	// with {name}; default mgmt-{name}.
	Repo string `yaml:"repo,omitempty" json:"repo,omitempty"`
	// Namespace on the management cluster holding the HelmReleases, chart
	// sources and hub Kustomizations (default fleetbot-clusters).
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
}

// ProvisionProfile is a provider's Cluster API chart, pinned, with the values
// every cluster of the profile must set.
type ProvisionProfile struct {
	// Name identifies the profile in spec.provision.profile (e.g. aws, vsphere).
	Name  string      `yaml:"name" json:"name"`
	Chart ChartSource `yaml:"chart" json:"chart"`
	// Required lists the values a cluster of this profile must set: any of
	// kubernetesVersion, region, nodePools, or a name of spec.provision.values.
	Required []string `yaml:"required,omitempty" json:"required,omitempty"`
}

// ChartSource says where a profile's chart comes from: a Helm repository
// (helmRepository + name) or an OCI artifact (ociRepository), at one exact
// version.
type ChartSource struct {
	// HelmRepository is the URL of a Helm repository (https://...).
	HelmRepository string `yaml:"helmRepository,omitempty" json:"helmRepository,omitempty"`
	// OCIRepository is the oci:// URL of the chart artifact.
	OCIRepository string `yaml:"ociRepository,omitempty" json:"ociRepository,omitempty"`
	// Name is the chart name in the Helm repository (helmRepository only).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Version is the exact chart version (semver, no ranges).
	Version string `yaml:"version" json:"version"`
}

// Provision asks fleetbot to create the cluster through Cluster API on a
// management cluster, with a profile's chart and these values.
type Provision struct {
	// ManagementCluster names an entry of platform spec.managementClusters.
	ManagementCluster string `yaml:"managementCluster" json:"managementCluster"`
	// Profile names an entry of platform spec.provisionProfiles.
	Profile string `yaml:"profile" json:"profile"`
	// KubernetesVersion is the cluster's Kubernetes version, v1.x.y.
	KubernetesVersion string `yaml:"kubernetesVersion,omitempty" json:"kubernetesVersion,omitempty"`
	// Region is the provider's region or site.
	Region string `yaml:"region,omitempty" json:"region,omitempty"`
	// NodePools are the cluster's worker pools.
	NodePools []NodePool `yaml:"nodePools,omitempty" json:"nodePools,omitempty"`
	// Values are further chart values, scalars only.
	Values Values `yaml:"values,omitempty" json:"values,omitempty"`
	// DeletionPolicy is Retain (default: removing the cluster orphans its
	// infrastructure) or Delete (removing the cluster destroys it). Only
	// platform admins may change it, and Delete must be merged before the
	// removal.
	DeletionPolicy string `yaml:"deletionPolicy,omitempty" json:"deletionPolicy,omitempty"`
}

// NodePool is one pool of worker machines.
type NodePool struct {
	Name string `yaml:"name" json:"name"`
	// Count is the number of machines (0 or more).
	Count *int `yaml:"count" json:"count"`
	// Size is the provider's machine size or instance type.
	Size string `yaml:"size,omitempty" json:"size,omitempty"`
}

// Policy returns the deletion policy, defaulting to Retain.
func (p *Provision) Policy() string {
	if p.DeletionPolicy == "" {
		return DeletionRetain
	}
	return p.DeletionPolicy
}

// ManagementCluster returns the platform's management cluster of that name, or nil.
func (r *Repo) ManagementCluster(name string) *ManagementCluster {
	if r.Platform == nil {
		return nil
	}
	for i := range r.Platform.Spec.ManagementClusters {
		if m := &r.Platform.Spec.ManagementClusters[i]; m.Name == name {
			return m
		}
	}
	return nil
}

// ProvisionProfile returns the platform's provision profile of that name, or nil.
func (r *Repo) ProvisionProfile(name string) *ProvisionProfile {
	if r.Platform == nil {
		return nil
	}
	for i := range r.Platform.Spec.ProvisionProfiles {
		if p := &r.Platform.Spec.ProvisionProfiles[i]; p.Name == name {
			return p
		}
	}
	return nil
}

// ManagementRepo is the name of the management cluster's repo: its repo
// (pattern), default mgmt-{name}, with {name} replaced.
func (r *Repo) ManagementRepo(name string) string {
	pattern := DefaultManagementRepo
	if m := r.ManagementCluster(name); m != nil && m.Repo != "" {
		pattern = m.Repo
	}
	return expandRepo(pattern, name)
}

// ProvisionNamespace returns the management cluster's provisioning namespace.
func (m *ManagementCluster) ProvisionNamespace() string {
	if m.Namespace != "" {
		return m.Namespace
	}
	return DefaultProvisionNamespace
}

// Provisioned returns the clusters that carry spec.provision on management
// cluster mgmt, sorted by name.
func (r *Repo) Provisioned(mgmt string) []*Cluster {
	var out []*Cluster
	for _, c := range r.Clusters {
		if c.Spec.Provision != nil && c.Spec.Provision.ManagementCluster == mgmt {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Cluster) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	return out
}

var (
	kubeVersionRe = regexp.MustCompile(`^v1\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	// exactSemverRe is an exact chart version: no ranges, wildcards or partial versions.
	exactSemverRe = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// provision validates platform spec.managementClusters and
// spec.provisionProfiles and every cluster's spec.provision.
func (v *validator) provision() {
	p := v.r.Platform
	if p == nil {
		return
	}
	src := p.Source
	mgmtRepos := map[string]string{}
	for _, c := range v.r.Clusters {
		mgmtRepos[strings.ToLower(v.r.ClusterRepo(c.Metadata.Name))] = "cluster " + c.Metadata.Name
	}
	for _, w := range v.r.Workspaces {
		mgmtRepos[strings.ToLower(v.r.WorkspaceRepo(w.Metadata.Name))] = "workspace " + w.Metadata.Name
	}
	if ctl := p.Spec.Repos.Control; ctl != "" {
		mgmtRepos[strings.ToLower(ctl)] = "the control repo"
	}
	seen := map[string]int{}
	for i, m := range p.Spec.ManagementClusters {
		path := fmt.Sprintf("spec.managementClusters.%d", i)
		v.entryName(m.Name, src, path, seen, i, "management cluster")
		if m.Name == "" {
			continue
		}
		repo := v.r.ManagementRepo(m.Name)
		if msg := repoNameProblem(repo); msg != "" {
			v.add(src.At(path+".repo"), "name the repo as on GitHub, without the owner, or use a pattern such as mgmt-{name}",
				"management cluster %s maps to repo name %q, which %s", m.Name, repo, msg)
		} else if what, dup := mgmtRepos[strings.ToLower(repo)]; dup {
			v.add(src.At(path+".repo"), "give the management repo a name of its own (e.g. mgmt-{name})",
				"management cluster %s and %s both map to repo %s/%s", m.Name, what, p.Spec.Owner, repo)
		} else {
			mgmtRepos[strings.ToLower(repo)] = "management cluster " + m.Name
		}
		if m.Namespace != "" {
			if errs := validation.IsDNS1123Label(m.Namespace); len(errs) > 0 {
				v.add(src.At(path+".namespace"), dnsLabelHint, "invalid namespace %q: %s", m.Namespace, strings.Join(errs, "; "))
			}
		}
	}
	seen = map[string]int{}
	for i, pr := range p.Spec.ProvisionProfiles {
		path := fmt.Sprintf("spec.provisionProfiles.%d", i)
		v.entryName(pr.Name, src, path, seen, i, "provision profile")
		v.chart(pr.Chart, src, path+".chart")
		for j, r := range pr.Required {
			if r != ValueKubernetesVersion && r != ValueRegion && r != ValueNodePools && !valueNameRe.MatchString(r) {
				v.add(src.At(fmt.Sprintf("%s.required.%d", path, j)),
					"list kubernetesVersion, region, nodePools or the name of a spec.provision.values entry",
					"invalid required value %q", r)
			}
		}
	}
	for _, c := range v.r.Clusters {
		if c.Spec.Provision != nil {
			v.clusterProvision(c)
		}
	}
}

// entryName checks the name of a named list entry: a DNS-1123 label, unique.
func (v *validator) entryName(name string, src Source, path string, seen map[string]int, i int, what string) {
	pos := src.At(path + ".name")
	switch {
	case name == "":
		v.add(pos, "name the "+what, "%s.name is required", path)
		return
	case len(validation.IsDNS1123Label(name)) > 0:
		v.add(pos, dnsLabelHint, "invalid %s name %q", what, name)
	}
	if j, dup := seen[name]; dup {
		v.add(pos, "remove the duplicate or rename it", "%s %q is declared twice (first at %s)", what, name, src.At(fmt.Sprintf("%s.%d", parentPath(path), j)))
		return
	}
	seen[name] = i
}

func (v *validator) chart(c ChartSource, src Source, path string) {
	switch {
	case c.HelmRepository == "" && c.OCIRepository == "":
		v.add(src.At(path), "set chart.helmRepository (https://...) with chart.name, or chart.ociRepository (oci://...)",
			"%s names no chart source", path)
	case c.HelmRepository != "" && c.OCIRepository != "":
		v.add(src.At(path+".ociRepository"), "keep one of helmRepository and ociRepository",
			"%s sets both helmRepository and ociRepository", path)
	case c.HelmRepository != "":
		if !strings.HasPrefix(c.HelmRepository, "https://") && !strings.HasPrefix(c.HelmRepository, "http://") {
			v.add(src.At(path+".helmRepository"), "use the https:// URL of the Helm repository (for an OCI registry use ociRepository)",
				"invalid helmRepository URL %q", c.HelmRepository)
		}
		if c.Name == "" {
			v.add(src.At(path+".name"), "set chart.name to the chart's name in the Helm repository", "%s.name is required with helmRepository", path)
		}
	default:
		if !strings.HasPrefix(c.OCIRepository, "oci://") {
			v.add(src.At(path+".ociRepository"), "use the oci:// URL of the chart artifact (e.g. oci://ghcr.io/acme/charts/capi-aws)",
				"invalid ociRepository URL %q", c.OCIRepository)
		}
		if c.Name != "" {
			v.add(src.At(path+".name"), "remove chart.name: the oci:// URL names the chart", "%s.name is only for helmRepository", path)
		}
	}
	switch {
	case c.Version == "":
		v.add(src.At(path+".version"), "pin the chart to an exact version such as 1.4.2", "%s.version is required", path)
	case !exactSemverRe.MatchString(c.Version):
		v.add(src.At(path+".version"), "pin an exact version such as 1.4.2: a range or wildcard lets a chart release change every cluster without a pull request",
			"chart version %q is not pinned", c.Version)
	}
}

func (v *validator) clusterProvision(c *Cluster) {
	src := c.Source
	pv := c.Spec.Provision
	const base = "spec.provision"
	if pv.ManagementCluster == "" {
		v.add(src.At(base+".managementCluster"), "name one of platform spec.managementClusters: "+listOrNone(v.mgmtNames()),
			"spec.provision.managementCluster is required")
	} else if v.r.ManagementCluster(pv.ManagementCluster) == nil {
		v.add(src.At(base+".managementCluster"), "use one of "+listOrNone(v.mgmtNames())+", or declare it under spec.managementClusters in "+v.r.Platform.Source.File,
			"unknown management cluster %q", pv.ManagementCluster)
	}
	var profile *ProvisionProfile
	if pv.Profile == "" {
		v.add(src.At(base+".profile"), "name one of platform spec.provisionProfiles: "+listOrNone(v.profileNames()), "spec.provision.profile is required")
	} else if profile = v.r.ProvisionProfile(pv.Profile); profile == nil {
		v.add(src.At(base+".profile"), "use one of "+listOrNone(v.profileNames())+", or declare it under spec.provisionProfiles in "+v.r.Platform.Source.File,
			"unknown provision profile %q", pv.Profile)
	}
	if pv.KubernetesVersion != "" && !kubeVersionRe.MatchString(pv.KubernetesVersion) {
		v.add(src.At(base+".kubernetesVersion"), "write the full version with its v: v1.x.y, such as v1.36.1",
			"invalid Kubernetes version %q", pv.KubernetesVersion)
	}
	pools := map[string]int{}
	for i, np := range pv.NodePools {
		path := fmt.Sprintf("%s.nodePools.%d", base, i)
		v.entryName(np.Name, src, path, pools, i, "node pool")
		switch {
		case np.Count == nil:
			v.add(src.At(path), "set count: the number of machines of the pool (0 or more)", "node pool %s has no count", np.Name)
		case *np.Count < 0:
			v.add(src.At(path+".count"), "use 0 or more machines", "node pool %s: count %d is negative", np.Name, *np.Count)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(pv.Values)) {
		if !valueNameRe.MatchString(k) {
			v.add(src.At(base+".values."+k), "value names are letters, digits and '_', not starting with a digit", "invalid value name %q", k)
		}
		if k == ValueKubernetesVersion || k == ValueRegion || k == ValueNodePools || k == "cluster" {
			v.add(src.At(base+".values."+k), "set it as spec.provision."+k+" (typed and validated)", "value %q is reserved", k)
		}
	}
	switch pv.DeletionPolicy {
	case "", DeletionRetain, DeletionDelete:
	default:
		v.add(src.At(base+".deletionPolicy"), "use Retain (removing the cluster keeps its machines) or Delete (removing the cluster destroys them)",
			"invalid deletionPolicy %q", pv.DeletionPolicy)
	}
	if profile == nil {
		return
	}
	for _, r := range profile.Required {
		set := false
		switch r {
		case ValueKubernetesVersion:
			set = pv.KubernetesVersion != ""
		case ValueRegion:
			set = pv.Region != ""
		case ValueNodePools:
			set = len(pv.NodePools) > 0
		default:
			_, set = pv.Values[r]
		}
		if !set {
			where := "spec.provision." + r
			if r != ValueKubernetesVersion && r != ValueRegion && r != ValueNodePools {
				where = "spec.provision.values." + r
			}
			v.add(src.At(base), "set "+where+" (profile "+profile.Name+" requires it)",
				"cluster %s: profile %s requires %s, which is not set", c.Metadata.Name, profile.Name, r)
		}
	}
}

func (v *validator) mgmtNames() []string {
	var out []string
	for _, m := range v.r.Platform.Spec.ManagementClusters {
		out = append(out, m.Name)
	}
	return out
}

func (v *validator) profileNames() []string {
	var out []string
	for _, p := range v.r.Platform.Spec.ProvisionProfiles {
		out = append(out, p.Name)
	}
	return out
}

// provisionWarnings flags a provisioned cluster that is in a workspace: in
// hub mode the management cluster applies the cluster repo's platform/ and
// apps/, but the workspace's objects live in flux/fleetbot.yaml, which only a
// Flux running on the cluster applies.
func provisionWarnings(r *Repo) Issues {
	var is Issues
	for _, c := range r.Clusters {
		if c.Spec.Provision == nil || c.Spec.Workspace == "" {
			continue
		}
		is.Add(c.Source.At("spec.workspace"),
			"bootstrap Flux on the cluster (the chart's post-provision hook, README \"Clusters by pull request\") or take the cluster out of the workspace",
			"cluster %s is provisioned in hub mode, which does not apply its workspace %s: only a Flux on the cluster applies flux/fleetbot.yaml", c.Metadata.Name, c.Spec.Workspace)
	}
	return is
}
