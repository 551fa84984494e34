package fanout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Names fleetbot uses in the Flux objects it writes.
const (
	// FluxNamespace is where flux bootstrap installs Flux and its GitRepository.
	FluxNamespace = "flux-system"
	// FluxBootstrapSource is the GitRepository flux bootstrap creates for the
	// cluster repo itself.
	FluxBootstrapSource = "flux-system"
	// fluxControllerAccount is kustomize-controller's own ServiceAccount,
	// which every Kustomization of flux-system fleetbot writes impersonates.
	fluxControllerAccount = "kustomize-controller"
	// managedByLabel marks every object fleetbot writes.
	managedByLabel = "app.kubernetes.io/managed-by"
)

// Names of the Kustomizations fleetbot writes into flux/fleetbot.yaml.
const (
	// componentPrefix starts the name of a component's Kustomization.
	componentPrefix = "platform-"
	// tenancyKustomization applies the tenancy policy directory.
	tenancyKustomization = "fleetbot-tenancy"
	// appsKustomization applies the cluster admins' apps/.
	appsKustomization = "apps"
)

// FluxOwner says what a Kustomization fleetbot writes applies, by its name: a platform
// component, a workspace, the cluster admins' apps or the tenancy policy; "" for any other
// (one a cluster or workspace admin wrote).
func FluxOwner(name string) string {
	switch {
	case name == appsKustomization:
		return "the cluster's apps"
	case name == tenancyKustomization:
		return "the tenancy policy"
	case strings.HasPrefix(name, componentPrefix):
		return "component " + strings.TrimPrefix(name, componentPrefix)
	case strings.HasPrefix(name, workspaceSourcePrefix):
		return "workspace " + strings.TrimPrefix(name, workspaceSourcePrefix)
	}
	return ""
}

// workspaceSourcePrefix starts the names of a workspace's GitRepository and Kustomization.
const workspaceSourcePrefix = "workspace-"

// component is one platform component of a cluster as Flux sees it: the
// app's name and the apps whose Kustomizations must be Ready first.
type component struct {
	app       string
	dependsOn []string
}

// componentKustomization is the name of the Kustomization of app.
func componentKustomization(app string) string { return componentPrefix + app }

// fluxInput is what the Flux objects of one cluster repo depend on.
type fluxInput struct {
	interval  time.Duration
	cluster   string
	workspace string // empty: no workspace
	namespace string
	repoURL   string // the workspace repo
	branch    string
	secretRef string // "": the workspace repo is read without credentials
	// podSecurity is the Pod Security level enforced on the workspace namespace.
	podSecurity string
	// wait makes the workspace Kustomization wait for what it applies to be ready
	// (spec.wait): with the generic-hmac health provider, so that a tenant HelmRelease's
	// failure, whose own events name no commit, fails the Kustomization on the workspace
	// commit it applied, which serve records and the rollout counts.
	wait bool
}

// fluxObjects renders flux/fleetbot.yaml for one cluster: the tenancy
// policy's Kustomization, one Kustomization per platform component, the apps
// Kustomization, all on the bootstrap source, and, for a workspace cluster, the namespace-confined objects that
// reconcile the workspace repo as the workspace's own ServiceAccount.
func fluxObjects(in fluxInput, components []component) ([]byte, error) {
	head, err := fluxHead(in.interval)
	if err != nil {
		return nil, err
	}
	out := head
	for _, c := range components {
		doc, err := fluxComponent(in.interval, c)
		if err != nil {
			return nil, err
		}
		out = append(append(out, "---\n"...), doc...)
	}
	apps, err := fluxApps(in.interval)
	if err != nil {
		return nil, err
	}
	out = append(append(out, "---\n"...), apps...)
	if in.workspace == "" {
		return out, nil
	}
	ws, err := fluxWorkspace(in)
	if err != nil {
		return nil, err
	}
	return append(append(out, "---\n"...), ws...), nil
}

// fluxKustomization is a Kustomization of flux-system on the bootstrap
// source, impersonating kustomize-controller: under the lockdown's
// --default-service-account the controller's own account must be named.
func fluxKustomization(name, path string, interval time.Duration) *kustomizev1.Kustomization {
	return &kustomizev1.Kustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: FluxNamespace, Labels: map[string]string{managedByLabel: "fleetbot"}},
		Spec: kustomizev1.KustomizationSpec{
			ServiceAccountName: fluxControllerAccount,
			Interval:           metav1.Duration{Duration: interval},
			Path:               path,
			Prune:              true,
			SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: FluxBootstrapSource},
		},
	}
}

// fluxHead renders the header and the tenancy policy's Kustomization, which
// are the same on every cluster.
func fluxHead(interval time.Duration) ([]byte, error) {
	return marshalAll(managedHeader, fluxKustomization(tenancyKustomization, "./"+PlatformDir+"/"+TenancyDir, interval))
}

// fluxComponent renders the Kustomization of one platform component.
func fluxComponent(interval time.Duration, c component) ([]byte, error) {
	k := fluxKustomization(componentKustomization(c.app), "./"+PlatformDir+"/"+c.app, interval)
	for _, d := range c.dependsOn {
		k.Spec.DependsOn = append(k.Spec.DependsOn, kustomizev1.DependencyReference{Name: componentKustomization(d)})
	}
	return marshalAll("", k)
}

// fluxApps renders the Kustomization of the cluster admins' apps/. It
// depends on nothing: no component may hold it back, and it is retried
// every interval until what it needs (a component's CRDs) exists.
func fluxApps(interval time.Duration) ([]byte, error) {
	return marshalAll("", fluxKustomization(appsKustomization, "./apps", interval))
}

// fluxWorkspace renders the objects of a workspace cluster, all in the
// workspace namespace: lockdown forbids cross-namespace references and
// impersonation needs the ServiceAccount beside the Kustomization.
func fluxWorkspace(in fluxInput) ([]byte, error) {
	labels := map[string]string{managedByLabel: "fleetbot"}
	iv := metav1.Duration{Duration: in.interval}
	ns, ws := in.namespace, in.workspace
	source := workspaceSourcePrefix + ws
	var secret *meta.LocalObjectReference
	if in.secretRef != "" {
		secret = &meta.LocalObjectReference{Name: in.secretRef}
	}
	nsLabels := map[string]string{managedByLabel: "fleetbot", WorkspaceLabel: ws}
	for _, l := range podSecurityLabels(in.podSecurity) {
		nsLabels[l[0]] = l[1]
	}
	return marshalAll("",
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels},
		},
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: ws, Namespace: ns, Labels: labels},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: ws + "-reconciler", Namespace: ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ws, Namespace: ns}},
		},
		&sourcev1.GitRepository{
			TypeMeta:   metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.GitRepositoryKind},
			ObjectMeta: metav1.ObjectMeta{Name: source, Namespace: ns, Labels: labels},
			Spec: sourcev1.GitRepositorySpec{
				URL:       in.repoURL,
				Reference: &sourcev1.GitRepositoryRef{Branch: in.branch},
				SecretRef: secret,
				Interval:  iv,
			},
		},
		&kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: source, Namespace: ns, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				Interval:           iv,
				Path:               "./clusters/" + in.cluster,
				Prune:              true,
				TargetNamespace:    ns,
				ServiceAccountName: ws,
				SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: source},
				Wait:               in.wait,
			},
		},
	)
}

// clusterPlaceholder stands for the cluster name in the workspace objects
// rendered once per workspace; a DNS label never contains capitals, so it
// cannot collide with a real name.
const clusterPlaceholder = "FLEETBOT-CLUSTER"

// flux returns flux/fleetbot.yaml for one cluster through the run's memo:
// the marshalling of typed objects is by far the costliest part of a
// cluster repo, the head and apps documents are the same on every cluster,
// a component's Kustomization the same on every cluster running it (its
// dependsOn comes from the catalog), and only one path differs between the
// clusters of a workspace.
func (x *run) flux(in fluxInput, components []component) ([]byte, error) {
	if x.fluxHead == nil {
		head, err := fluxHead(in.interval)
		if err != nil {
			return nil, err
		}
		apps, err := fluxApps(in.interval)
		if err != nil {
			return nil, err
		}
		x.fluxHead, x.fluxApps = head, apps
	}
	docs := make([][]byte, len(components))
	size := len(x.fluxHead) + len(x.fluxApps) + 4
	for i, c := range components {
		doc, ok := x.fluxComponents[c.app]
		if !ok {
			var err error
			if doc, err = fluxComponent(in.interval, c); err != nil {
				return nil, err
			}
			x.fluxComponents[c.app] = doc
		}
		docs[i] = doc
		size += len(doc) + 4
	}
	var ws []byte
	if in.workspace != "" {
		if !isDNSLabel(in.cluster) {
			return fluxObjects(in, components)
		}
		key := in
		key.cluster = clusterPlaceholder
		var err error
		if ws, err = x.fluxWorkspace.get(key, fluxWorkspace); err != nil {
			return nil, err
		}
		size += len(ws) + 4 + len(in.cluster)
	}
	out := make([]byte, 0, size)
	out = append(out, x.fluxHead...)
	for _, doc := range docs {
		out = append(append(out, "---\n"...), doc...)
	}
	out = append(append(out, "---\n"...), x.fluxApps...)
	if ws == nil {
		return out, nil
	}
	out = append(out, "---\n"...)
	// The first path of the placeholder cluster becomes this cluster's (bytes.Replace, n = 1,
	// without its copy of ws per cluster).
	before, after, found := bytes.Cut(ws, []byte("./clusters/"+clusterPlaceholder+"\n"))
	if !found {
		return append(out, ws...), nil
	}
	out = append(append(out, before...), "./clusters/"+in.cluster+"\n"...)
	return append(out, after...), nil
}

// isDNSLabel reports whether s is a lowercase RFC 1123 label.
func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// marshalAll renders objects as one multi-document YAML after header.
func marshalAll(header string, objs ...any) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(header)
	for i, o := range objs {
		if i > 0 {
			out.WriteString("---\n")
		}
		data, err := cleanYAML(o)
		if err != nil {
			return nil, err
		}
		out.Write(data)
	}
	return out.Bytes(), nil
}

// cleanYAML marshals a typed API object without the fields a manifest must
// not carry: status and the zero creationTimestamp. Keys come out sorted, so
// the bytes are deterministic.
func cleanYAML(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %T as YAML: %w", obj, err)
	}
	return out, nil
}
