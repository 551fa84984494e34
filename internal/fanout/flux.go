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
	secretRef string
}

// fluxObjects renders flux/fleetbot.yaml for one cluster: the platform and
// apps Kustomizations on the bootstrap source and, for a workspace cluster,
// the namespace-confined objects that reconcile the workspace repo as the
// workspace's own ServiceAccount.
func fluxObjects(in fluxInput) ([]byte, error) {
	labels := map[string]string{managedByLabel: "fleetbot"}
	interval := metav1.Duration{Duration: in.interval}
	objs := []any{
		&kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: FluxNamespace, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				Interval:  interval,
				Path:      "./platform",
				Prune:     true,
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: FluxBootstrapSource},
			},
		},
		&kustomizev1.Kustomization{
			TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
			ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: FluxNamespace, Labels: labels},
			Spec: kustomizev1.KustomizationSpec{
				Interval:  interval,
				Path:      "./apps",
				Prune:     true,
				DependsOn: []kustomizev1.DependencyReference{{Name: "platform"}},
				SourceRef: kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: FluxBootstrapSource},
			},
		},
	}
	if in.workspace != "" {
		ns, ws := in.namespace, in.workspace
		source := "workspace-" + ws
		objs = append(objs,
			&corev1.Namespace{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
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
					SecretRef: &meta.LocalObjectReference{Name: in.secretRef},
					Interval:  interval,
				},
			},
			&kustomizev1.Kustomization{
				TypeMeta:   metav1.TypeMeta{APIVersion: kustomizev1.GroupVersion.String(), Kind: kustomizev1.KustomizationKind},
				ObjectMeta: metav1.ObjectMeta{Name: source, Namespace: ns, Labels: labels},
				Spec: kustomizev1.KustomizationSpec{
					Interval:           interval,
					Path:               "./clusters/" + in.cluster,
					Prune:              true,
					TargetNamespace:    ns,
					ServiceAccountName: ws,
					SourceRef:          kustomizev1.CrossNamespaceSourceReference{Kind: sourcev1.GitRepositoryKind, Name: source},
				},
			},
		)
	}
	var out bytes.Buffer
	out.WriteString("# Managed by fleetbot. Do not edit: changes are overwritten.\n")
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
