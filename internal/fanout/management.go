package fanout

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// KindManagement is the repo of a management cluster: one HelmRelease per
// cluster it provisions through Cluster API, the chart sources, and the
// hub-mode Kustomizations that apply each new cluster's repo to it.
const KindManagement Kind = "management"

// Paths of a management repo.
const (
	// ProvisionDir holds everything the management cluster's Flux applies.
	ProvisionDir = "provision"
	// ProvisionClustersDir holds provision/clusters/<cluster>.yaml.
	ProvisionClustersDir = ProvisionDir + "/clusters"
	// ProvisionSourcesDir holds provision/sources/<profile>.yaml.
	ProvisionSourcesDir = ProvisionDir + "/sources"
)

// Annotations of the objects of a management repo.
const (
	// DeletionPolicyAnnotation on a HelmRelease records the cluster's
	// spec.provision.deletionPolicy as merged: plan reads it from the
	// management repo's default branch to tell an orphaning removal from a
	// destroying one.
	DeletionPolicyAnnotation = "fleetbot.io/deletion-policy"
	// PruneAnnotation with PruneDisabled keeps an object when its file is
	// removed: kustomize-controller's garbage collection skips live objects
	// carrying it. A Retain cluster's objects carry it, so removing the
	// cluster from the control repo deletes neither its HelmRelease (whose
	// deletion would uninstall the chart and have Cluster API destroy the
	// machines) nor its hub Kustomizations (whose deletion would prune the
	// cluster's platform).
	PruneAnnotation = "kustomize.toolkit.fluxcd.io/prune"
	// PruneDisabled is the value of PruneAnnotation that disables pruning.
	PruneDisabled = "disabled"
	// ClusterLabel names the provisioned cluster of an object.
	ClusterLabel = "fleetbot.io/cluster"
)

// helmChartMediaType is the layer of an OCI artifact holding a Helm chart.
const helmChartMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// hubRetryInterval is how often a hub Kustomization retries while the new
// cluster's kubeconfig Secret does not exist yet.
const hubRetryInterval = time.Minute

// managementManaged reports whether fleetbot owns p in a management repo.
func managementManaged(p string) bool {
	return p == FluxPath || strings.HasPrefix(p, ProvisionDir+"/")
}

// managementTargets lays out the repo of every management cluster.
func (x *run) managementTargets() []*Target {
	p := x.repo.Platform
	var out []*Target
	mgmts := append([]control.ManagementCluster(nil), p.Spec.ManagementClusters...)
	sort.Slice(mgmts, func(i, j int) bool { return mgmts[i].Name < mgmts[j].Name })
	for i := range mgmts {
		out = append(out, x.managementTarget(&mgmts[i]))
	}
	return out
}

func (x *run) managementTarget(m *control.ManagementCluster) *Target {
	s := x.settings()
	repo := x.repo.ManagementRepo(m.Name)
	t := x.newTarget(KindManagement, m.Name, repo, s)
	t.Scaffolds = map[string][]byte{} // nothing here belongs to anyone but platform admins
	ns := m.ProvisionNamespace()
	labels := map[string]string{managedByLabel: "fleetbot"}

	clusters := x.repo.Provisioned(m.Name)
	profiles := map[string]bool{}
	resources := []string{"namespace.yaml"}
	var sources, files []string
	for _, c := range clusters {
		name := c.Metadata.Name
		pv := c.Spec.Provision
		profile := x.repo.ProvisionProfile(pv.Profile)
		if profile == nil {
			x.addOnce(c.Source.At("spec.provision.profile"), "declare it under spec.provisionProfiles", "unknown provision profile %q", pv.Profile)
			continue
		}
		profiles[profile.Name] = true
		data, err := marshalAll(managedHeader, x.provisionObjects(c, profile, ns, s)...)
		if err != nil {
			x.addOnce(c.Source.At("spec.provision"), "", "cluster %s: rendering its provisioning objects: %v", name, err)
			continue
		}
		t.Files[ProvisionClustersDir+"/"+name+".yaml"] = data
		files = append(files, "clusters/"+name+".yaml")
	}
	for _, pr := range x.repo.Platform.Spec.ProvisionProfiles {
		if !profiles[pr.Name] {
			continue
		}
		data, err := marshalAll(managedHeader, chartSource(pr, ns, s.interval, labels))
		if err != nil {
			x.addOnce(x.repo.Platform.Source.At("spec.provisionProfiles"), "", "profile %s: rendering its chart source: %v", pr.Name, err)
			continue
		}
		t.Files[ProvisionSourcesDir+"/"+pr.Name+".yaml"] = data
		sources = append(sources, "sources/"+pr.Name+".yaml")
	}
	sort.Strings(sources)
	resources = append(append(resources, sources...), files...)
	nsData, err := marshalAll(managedHeader, &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
	})
	if err != nil {
		x.addOnce(x.repo.Platform.Source.At("spec.managementClusters"), "", "management cluster %s: %v", m.Name, err)
	}
	t.Files[ProvisionDir+"/namespace.yaml"] = nsData
	t.Files[ProvisionDir+"/kustomization.yaml"] = kustomizationOf(managedHeader, resources)
	entry := fluxKustomization(ProvisionDir, "./"+ProvisionDir, s.interval)
	flux, err := marshalAll(managedHeader, entry)
	if err != nil {
		x.addOnce(x.repo.Platform.Source.At("spec.managementClusters"), "", "management cluster %s: %v", m.Name, err)
	}
	t.Files[FluxPath] = flux
	t.Files[CodeownersPath] = policy.CODEOWNERS(s.owner, []policy.Rule{{Pattern: "*", Teams: s.admins}})
	t.Files[ReadmePath] = managementReadme(s, m, repo, clusters, x.clusterRepo, x.repo.HasRollout(), x.repo.HealthDelivery().Provider == control.HealthGenericHMAC)
	t.Access = policy.ControlRepoAccess(s.admins, s.branch)
	withBranchRules(&t.Access, s.rules, KindManagement, m.Name)
	t.Access.AllowAutoMerge = s.autoMerge
	return t
}

// chartSource is the HelmRepository or OCIRepository of a profile, shared by
// every cluster of the profile on a management cluster.
func chartSource(pr control.ProvisionProfile, ns string, interval time.Duration, labels map[string]string) any {
	om := metav1.ObjectMeta{Name: pr.Name, Namespace: ns, Labels: labels}
	iv := metav1.Duration{Duration: interval}
	if pr.Chart.OCIRepository != "" {
		return &sourcev1.OCIRepository{
			TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind},
			ObjectMeta: om,
			Spec: sourcev1.OCIRepositorySpec{
				URL:           pr.Chart.OCIRepository,
				Reference:     &sourcev1.OCIRepositoryRef{Tag: pr.Chart.Version},
				LayerSelector: &sourcev1.OCILayerSelector{MediaType: helmChartMediaType, Operation: sourcev1.OCILayerCopy},
				Interval:      iv,
			},
		}
	}
	return &sourcev1.HelmRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmRepositoryKind},
		ObjectMeta: om,
		Spec:       sourcev1.HelmRepositorySpec{URL: pr.Chart.HelmRepository, Interval: iv},
	}
}

// provisionObjects are the objects of one provisioned cluster on its
// management cluster: the HelmRelease of the profile's chart with the
// cluster's values, the GitRepository of the cluster's own repo and the
// hub Kustomizations applying its platform/ and apps/ to the new cluster
// through the kubeconfig Secret Cluster API writes (<cluster>-kubeconfig,
// key value).
//
// Ordering: Flux's dependsOn cannot name a HelmRelease from a
// Kustomization, so the hub Kustomizations simply fail until Cluster API has
// written the kubeconfig Secret and the API server answers, and are retried
// every hubRetryInterval; nothing is applied to the cluster before that.
func (x *run) provisionObjects(c *control.Cluster, profile *control.ProvisionProfile, ns string, s settings) []any {
	name := c.Metadata.Name
	pv := c.Spec.Provision
	labels := map[string]string{managedByLabel: "fleetbot", ClusterLabel: name}
	annotations := map[string]string{DeletionPolicyAnnotation: pv.Policy()}
	if pv.Policy() != control.DeletionDelete {
		annotations[PruneAnnotation] = PruneDisabled
	}
	iv := metav1.Duration{Duration: s.interval}
	om := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels, Annotations: annotations}
	}
	values, _ := json.Marshal(provisionValues(c))
	hr := &helmv2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: om(name),
		Spec: helmv2.HelmReleaseSpec{
			Interval:    iv,
			ReleaseName: name,
			Values:      &apiextensionsv1.JSON{Raw: values},
		},
	}
	if profile.Chart.OCIRepository != "" {
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: profile.Name}
	} else {
		hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
			Chart:     profile.Chart.Name,
			Version:   profile.Chart.Version,
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: profile.Name},
		}}
	}
	repo := x.clusterRepo(name)
	var secret *meta.LocalObjectReference
	if s.secretRef != "" {
		secret = &meta.LocalObjectReference{Name: s.secretRef}
	}
	git := &sourcev1.GitRepository{
		TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind},
		ObjectMeta: om(repo),
		Spec: sourcev1.GitRepositorySpec{
			URL:       x.r.gitURL + "/" + s.owner + "/" + repo,
			Reference: &sourcev1.GitRepositoryRef{Branch: s.branch},
			SecretRef: secret,
			Interval:  iv,
		},
	}
	hub := func(suffix, path string, after string) *kustomizev1.Kustomization {
		k := &kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: om(name + "-" + suffix),
			Spec: kustomizev1.KustomizationSpec{
				Interval:      iv,
				RetryInterval: &metav1.Duration{Duration: hubRetryInterval},
				Path:          path,
				Prune:         true,
				SourceRef:     kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: repo},
				KubeConfig: &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{
					Name: KubeconfigSecret(name), Key: "value",
				}},
			},
		}
		if after != "" {
			k.Spec.DependsOn = []kustomizev1.DependencyReference{{Name: name + "-" + after}}
		}
		return k
	}
	objs := []any{hr, git, hub("platform", "./"+PlatformDir, ""), hub("apps", "./apps", "platform")}
	if x.repo.HasRollout() {
		objs = append(objs, x.hubHealth(name, ns, git.Spec.URL, om)...)
	}
	return objs
}

// notificationObject is a notification-controller object (Provider, Alert)
// with a free-form spec: the github health objects keep the bytes they had
// before the notification API module was required (the generic-hmac ones are
// its typed objects).
type notificationObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              map[string]any `json:"spec"`
}

// notificationAPIVersion is the API of the notification objects fleetbot renders.
const notificationAPIVersion = "notification.toolkit.fluxcd.io/v1beta3"

// HubHealthName names the Provider and Alert of a hub-mode cluster on its
// management cluster: <cluster>-health.
func HubHealthName(cluster string) string { return cluster + "-health" }

// hubHealth renders, for a rollout in waves, the Provider and Alert that make
// the management cluster's Flux report the health of cluster as commit
// statuses on its cluster repo (repoURL). In hub mode the cluster runs no
// Flux of its own and its repo's flux/ is never applied, so the Provider and
// Alert of flux/fleetbot.yaml never exist: the hub Kustomizations
// <cluster>-platform and <cluster>-apps apply the cluster repo's commits on
// the management cluster, whose notification-controller posts
// "kustomization/<cluster>-platform/<uid prefix>" (and -apps) on them, which
// the wave gate reads like any cluster's. The Provider reads the Secret
// HealthSecret of the provision namespace. With generic-hmac health the
// Provider instead posts the hub Kustomizations' events to fleetbot serve
// (HealthURL of the provision namespace), signed with the token of the
// Secret <cluster>-health there: each cluster its own key.
func (x *run) hubHealth(cluster, ns, repoURL string, om func(string) metav1.ObjectMeta) []any {
	if h := x.repo.HealthDelivery(); h.Provider == control.HealthGenericHMAC {
		name := HubHealthName(cluster)
		o := om(name)
		md := map[string]string{HealthMetaCluster: cluster}
		objs := hmacHealth(name, ns, HealthURL(h.URL, cluster, ns), name, md, []notificationv1.CrossNamespaceObjectReference{
			{Kind: kustomizev1.KustomizationKind, Name: cluster + "-platform"},
			{Kind: kustomizev1.KustomizationKind, Name: cluster + "-apps"},
		})
		for _, obj := range objs { // the hub objects' labels and annotations
			switch obj := obj.(type) {
			case *notificationv1beta3.Provider:
				obj.ObjectMeta = o
			case *notificationv1beta3.Alert:
				obj.ObjectMeta = o
			}
		}
		return objs
	}
	return githubHubHealth(cluster, repoURL, om)
}

// githubHubHealth is hubHealth's github Provider and Alert, posting commit statuses.
func githubHubHealth(cluster, repoURL string, om func(string) metav1.ObjectMeta) []any {
	name := HubHealthName(cluster)
	return []any{
		&notificationObject{
			TypeMeta:   metav1.TypeMeta{APIVersion: notificationAPIVersion, Kind: "Provider"},
			ObjectMeta: om(name),
			Spec: map[string]any{
				"type":      "github",
				"address":   repoURL,
				"secretRef": map[string]any{"name": HealthSecret},
			},
		},
		&notificationObject{
			TypeMeta:   metav1.TypeMeta{APIVersion: notificationAPIVersion, Kind: "Alert"},
			ObjectMeta: om(name),
			Spec: map[string]any{
				"providerRef":   map[string]any{"name": name},
				"eventSeverity": "info",
				"eventSources": []any{
					map[string]any{"kind": kustomizev1.KustomizationKind, "name": cluster + "-platform"},
					map[string]any{"kind": kustomizev1.KustomizationKind, "name": cluster + "-apps"},
				},
			},
		},
	}
}

// KubeconfigSecret is the Secret Cluster API writes with the kubeconfig of
// cluster (key value), in the namespace of its Cluster object.
func KubeconfigSecret(cluster string) string { return cluster + "-kubeconfig" }

// provisionValues are the chart values of a provisioned cluster: its name,
// the typed values, and the further values (scalars: integers and booleans
// as such, everything else as a string).
func provisionValues(c *control.Cluster) map[string]any {
	pv := c.Spec.Provision
	v := map[string]any{"cluster": map[string]any{"name": c.Metadata.Name}}
	if pv.KubernetesVersion != "" {
		v[control.ValueKubernetesVersion] = pv.KubernetesVersion
	}
	if pv.Region != "" {
		v[control.ValueRegion] = pv.Region
	}
	if len(pv.NodePools) > 0 {
		pools := make([]map[string]any, 0, len(pv.NodePools))
		for _, np := range pv.NodePools {
			p := map[string]any{"name": np.Name, "count": 0}
			if np.Count != nil {
				p["count"] = *np.Count
			}
			if np.Size != "" {
				p["size"] = np.Size
			}
			pools = append(pools, p)
		}
		v[control.ValueNodePools] = pools
	}
	for k, s := range pv.Values {
		v[k] = scalarValue(s)
	}
	return v
}

// scalarValue types a value's literal text: true, false and an integer in
// canonical form (no plus sign, no leading zero) stay one; everything else,
// 012345678901 (an account id) or 1.50 included, is a string, so no
// character of it is lost.
func scalarValue(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(i, 10) == s {
		return i
	}
	return s
}

func managementReadme(s settings, m *control.ManagementCluster, repo string, clusters []*control.Cluster, clusterRepo func(string) string, waves, hmac bool) []byte {
	var b strings.Builder
	platform := teams(s.owner, s.admins, "platform admins")
	ns := m.ProvisionNamespace()
	b.WriteString(readmeHeader)
	fmt.Fprintf(&b, "# %s\n\n", repo)
	fmt.Fprintf(&b, "The GitOps repo of management cluster **%s**, which runs Cluster API and Flux. fleetbot renders it from the control repo: one HelmRelease per cluster provisioned here, the charts' sources, and the hub-mode Kustomizations that apply each new cluster's repo to it. ", m.Name)
	fmt.Fprintf(&b, "Every path is managed by fleetbot and owned by %s: change the control repo instead. Changes reach `%s` by pull request only.\n\n", platform, s.branch)
	b.WriteString("## Bootstrap Flux\n\n")
	fmt.Fprintf(&b, "```sh\nflux bootstrap github --owner=%s --repository=%s --branch=%s --path=flux\n```\n\n", s.owner, repo, s.branch)
	fmt.Fprintf(&b, "Flux then applies `flux/fleetbot.yaml`: the Kustomization `provision` (path `./provision`) with everything below, in namespace `%s`. ", ns)
	b.WriteString("helm-controller installs the charts with its own rights: do not apply the multi-tenancy lockdown's `--default-service-account` here, or give the HelmReleases a ServiceAccount allowed to create Cluster API objects.\n\n")
	b.WriteString("## Clusters\n\n")
	if len(clusters) == 0 {
		b.WriteString("None: no cluster of the control repo is provisioned here.\n\n")
	} else {
		b.WriteString("| cluster | profile | Kubernetes | node pools | deletion policy | cluster repo |\n|---|---|---|---|---|---|\n")
		for _, c := range clusters {
			pv := c.Spec.Provision
			var pools []string
			for _, np := range pv.NodePools {
				n := 0
				if np.Count != nil {
					n = *np.Count
				}
				pools = append(pools, fmt.Sprintf("%s: %d", np.Name, n))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | `%s/%s` |\n", c.Metadata.Name, pv.Profile, orDash(pv.KubernetesVersion),
				orDash(strings.Join(pools, ", ")), pv.Policy(), s.owner, clusterRepo(c.Metadata.Name))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Files\n\n")
	b.WriteString("- `provision/sources/<profile>.yaml`: the pinned chart source (HelmRepository or OCIRepository) of each profile in use.\n")
	b.WriteString("- `provision/clusters/<cluster>.yaml`: the cluster's HelmRelease (its values: `cluster.name`, `kubernetesVersion`, `region`, `nodePools`, and the profile's further values), the GitRepository of its cluster repo, and the Kustomizations `<cluster>-platform` (path `./platform`) and `<cluster>-apps` (path `./apps`, after `<cluster>-platform`), which apply to the new cluster through `spec.kubeConfig.secretRef` = the Secret `<cluster>-kubeconfig` (key `value`) that Cluster API writes. They fail and are retried every minute until that Secret exists and the cluster answers.\n")
	switch {
	case waves && hmac:
		fmt.Fprintf(&b, "- With the rollout in waves, also the Provider and Alert `<cluster>-health`: the management cluster's Flux posts the hub Kustomizations' events to fleetbot serve (the wave gate waits for their health), signed with the Secret `<cluster>-health` in `%s` that the platform admins create per cluster (key `token`: the cluster's key for namespace `%s`, see the fleetbot README).\n", ns, ns)
	case waves:
		fmt.Fprintf(&b, "- With the rollout in waves, also the Provider and Alert `<cluster>-health`: the management cluster's Flux posts the hub Kustomizations' health as commit statuses on the cluster repo (the wave gate waits for them), with the Secret `%s` in `%s` that the platform admins create once (key `token`, allowed to write commit statuses on every cluster repo here; and `ca.crt` for a GitHub Enterprise Server with a private CA).\n", HealthSecret, ns)
	}
	b.WriteString("\n")
	b.WriteString("## Removing a cluster\n\n")
	fmt.Fprintf(&b, "A cluster with deletion policy `Retain` (the default) carries `%s: %s`: when it leaves the control repo, Flux keeps its HelmRelease and Kustomizations, so Cluster API destroys nothing; delete them by hand when the machines are gone. ", PruneAnnotation, PruneDisabled)
	b.WriteString("Set `spec.provision.deletionPolicy: Delete` in the control repo and merge that pull request here first: only then does removing the cluster delete its HelmRelease, uninstall the chart, and have Cluster API destroy its machines.\n")
	return []byte(b.String())
}

// provisionedNote is the README section of a provisioned cluster's repo:
// where the cluster comes from, and that hub mode needs no bootstrap.
func (x *run) provisionedNote(c *control.Cluster) []byte {
	pv := c.Spec.Provision
	if pv == nil {
		return nil
	}
	name := c.Metadata.Name
	var b strings.Builder
	b.WriteString("\n## Provisioned by pull request\n\n")
	fmt.Fprintf(&b, "Cluster API creates this cluster on management cluster **%s** (repo `%s/%s`, file `%s/%s.yaml`), with profile `%s` and deletion policy `%s`. ",
		pv.ManagementCluster, x.repo.Platform.Spec.Owner, x.repo.ManagementRepo(pv.ManagementCluster), ProvisionClustersDir, name, pv.Profile, pv.Policy())
	fmt.Fprintf(&b, "The management cluster's Flux applies `platform/` (Kustomization `%s-platform`) and then `apps/` (`%s-apps`) to it through the kubeconfig Secret `%s` (hub mode): no `flux bootstrap` is needed for them. ",
		name, name, KubeconfigSecret(name))
	b.WriteString("`flux/fleetbot.yaml` is applied only if Flux is bootstrapped on the cluster itself (then do not also keep the hub Kustomizations: two Flux instances would fight over the same objects).")
	if x.repo.HasRollout() {
		fmt.Fprintf(&b, " In hub mode the management cluster reports this cluster's health to the rollout (Provider and Alert `%s` beside the hub Kustomizations), not the Provider of `flux/fleetbot.yaml`.", HubHealthName(name))
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// orDash is s, or "-" for a table cell when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
