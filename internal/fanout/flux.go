package fanout

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	// which the platform and apps Kustomizations impersonate.
	fluxControllerAccount = "kustomize-controller"
	// managedByLabel marks every object fleetbot writes.
	managedByLabel = "app.kubernetes.io/managed-by"
)

// fluxInput is what the Flux objects of one cluster repo depend on.
type fluxInput struct {
	interval  time.Duration
	cluster   string
	workspace string // empty: no workspace
	namespace string
	repoURL   string // the workspace repo
	branch    string
	secretRef string // "": the workspace repo is read without credentials
}

// fluxObjects renders flux/fleetbot.yaml for one cluster: the platform and
// apps Kustomizations on the bootstrap source and, for a workspace cluster,
// the namespace-confined objects that reconcile the workspace repo as the
// workspace's own ServiceAccount.
func fluxObjects(in fluxInput) ([]byte, error) {
	base, err := fluxBase(in.interval)
	if err != nil || in.workspace == "" {
		return base, err
	}
	ws, err := fluxWorkspace(in)
	if err != nil {
		return nil, err
	}
	return append(append(base, "---\n"...), ws...), nil
}

// fluxBase renders the header and the platform and apps Kustomizations,
// which are the same on every cluster.
func fluxBase(interval time.Duration) ([]byte, error) {
	labels := map[string]string{managedByLabel: "fleetbot"}
	iv := metav1.Duration{Duration: interval}
	return marshalAll(managedHeader,
		&kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: FluxNamespace, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				// Under the lockdown's --default-service-account the
				// controller's own account must be named.
				ServiceAccountName: fluxControllerAccount,
				Interval:           iv,
				Path:               "./platform",
				Prune:              true,
				SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: FluxBootstrapSource},
			},
		},
		&kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: FluxNamespace, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				// Under the lockdown's --default-service-account the
				// controller's own account must be named.
				ServiceAccountName: fluxControllerAccount,
				Interval:           iv,
				Path:               "./apps",
				Prune:              true,
				DependsOn:          []kustomizev1.DependencyReference{{Name: "platform"}},
				SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: FluxBootstrapSource},
			},
		},
	)
}

// fluxWorkspace renders the objects of a workspace cluster, all in the
// workspace namespace: lockdown forbids cross-namespace references and
// impersonation needs the ServiceAccount beside the Kustomization.
func fluxWorkspace(in fluxInput) ([]byte, error) {
	labels := map[string]string{managedByLabel: "fleetbot"}
	iv := metav1.Duration{Duration: in.interval}
	ns, ws := in.namespace, in.workspace
	source := "workspace-" + ws
	var secret *meta.LocalObjectReference
	if in.secretRef != "" {
		secret = &meta.LocalObjectReference{Name: in.secretRef}
	}
	return marshalAll("",
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{managedByLabel: "fleetbot", WorkspaceLabel: ws}},
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
// cluster repo, and only one path differs between the clusters of a
// workspace.
func (x *run) flux(in fluxInput) ([]byte, error) {
	if x.fluxBase == nil {
		b, err := fluxBase(in.interval)
		if err != nil {
			return nil, err
		}
		x.fluxBase = b
	}
	if in.workspace == "" {
		return x.fluxBase, nil
	}
	if !isDNSLabel(in.cluster) {
		return fluxObjects(in)
	}
	key := in
	key.cluster = clusterPlaceholder
	ws, ok := x.fluxWorkspace[key]
	if !ok {
		var err error
		if ws, err = fluxWorkspace(key); err != nil {
			return nil, err
		}
		x.fluxWorkspace[key] = ws
	}
	out := make([]byte, 0, len(x.fluxBase)+4+len(ws)+len(in.cluster))
	out = append(append(out, x.fluxBase...), "---\n"...)
	return append(out, bytes.Replace(ws, []byte("./clusters/"+clusterPlaceholder+"\n"), []byte("./clusters/"+in.cluster+"\n"), 1)...), nil
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
