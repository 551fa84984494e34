package fanout

import (
	"reflect"
	"slices"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// Paths and names of the multi-tenancy lockdown fleetbot renders into
// every cluster repo.
const (
	// FluxSystemKustomPath is Flux's own kustomization, which fleetbot
	// scaffolds with the lockdown patches; flux bootstrap --path=flux keeps
	// an existing one and the cluster admins own it afterwards.
	FluxSystemKustomPath = "flux/flux-system/kustomization.yaml"
	// TenancyDir is the managed directory of platform/ holding the
	// ValidatingAdmissionPolicy and its binding, applied by the
	// Kustomization fleetbot-tenancy. Its name has a dot, which no app name
	// (a DNS label) has, so it never collides with a component's directory.
	TenancyDir = "fleetbot.flux-tenancy"
	// TenancyPolicyFile is the policy's file, relative to platform/.
	TenancyPolicyFile = TenancyDir + "/policy.yaml"
	// WorkspaceLabel marks a workspace namespace with the workspace's name,
	// which is also the name of the ServiceAccount its Flux objects must
	// impersonate. The tenancy policy binds to the namespaces carrying it.
	WorkspaceLabel = "fleetbot.io/workspace"
	// tenancyPolicyName names the policy and its binding.
	tenancyPolicyName = "fleetbot-flux-tenancy"
	// tenantKindsPolicyName names the policy holding a workspace's ServiceAccount to the tenant
	// allowlist's kinds, and its binding.
	tenantKindsPolicyName = "fleetbot-tenant-kinds"
)

// lockdownScaffold is flux/flux-system/kustomization.yaml as the Flux
// documentation's multi-tenancy lockdown writes it
// (https://fluxcd.io/flux/installation/configuration/multi-tenancy/): no
// cross-namespace references in the controllers that follow them, no
// remote bases in kustomize-controller, impersonation of the namespace's
// default ServiceAccount when a Kustomization or HelmRelease names none,
// and the bootstrap Kustomization itself (flux-system, which applies
// ./flux) running as kustomize-controller so it keeps its rights.
const lockdownScaffold = `# Created by fleetbot once, with Flux's multi-tenancy lockdown; yours (the
# cluster admins') from now on. flux bootstrap --path=flux keeps this file.
# https://fluxcd.io/flux/installation/configuration/multi-tenancy/
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- gotk-components.yaml
- gotk-sync.yaml
patches:
- patch: |
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --no-cross-namespace-refs=true
  target:
    kind: Deployment
    name: (kustomize-controller|helm-controller|notification-controller|image-reflector-controller|image-automation-controller)
- patch: |
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --no-remote-bases=true
  target:
    kind: Deployment
    name: kustomize-controller
- patch: |
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --default-service-account=default
  target:
    kind: Deployment
    name: (kustomize-controller|helm-controller)
- patch: |
    - op: add
      path: /spec/serviceAccountName
      value: kustomize-controller
  target:
    kind: Kustomization
    name: flux-system
`

// tenancyValidations are the rules of the tenancy policy, in CEL over the
// Flux Kustomization or HelmRelease being admitted into a workspace
// namespace: the same confinement check workspace enforces on the repo.
var tenancyValidations = []admissionv1.Validation{
	{
		Expression:        "has(object.spec.serviceAccountName) && object.spec.serviceAccountName == variables.serviceAccount",
		MessageExpression: "'spec.serviceAccountName must be ' + variables.serviceAccount + ', the ServiceAccount of workspace namespace ' + namespaceObject.metadata.name + ': without it Flux applies with its own cluster-wide rights'",
		Reason:            ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.kubeConfig)",
		Message:    "spec.kubeConfig is not allowed in a workspace namespace: it would apply with another identity or to another cluster",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.sourceRef) || !has(object.spec.sourceRef.namespace) || object.spec.sourceRef.namespace == namespaceObject.metadata.name",
		Message:    "spec.sourceRef must not name another namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.chartRef) || !has(object.spec.chartRef.namespace) || object.spec.chartRef.namespace == namespaceObject.metadata.name",
		Message:    "spec.chartRef must not name another namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.chart) || !has(object.spec.chart.spec) || !has(object.spec.chart.spec.sourceRef) || !has(object.spec.chart.spec.sourceRef.namespace) || object.spec.chart.spec.sourceRef.namespace == namespaceObject.metadata.name",
		Message:    "spec.chart.spec.sourceRef must not name another namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.targetNamespace) || object.spec.targetNamespace == namespaceObject.metadata.name",
		Message:    "spec.targetNamespace must be the workspace namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.storageNamespace) || object.spec.storageNamespace == namespaceObject.metadata.name",
		Message:    "spec.storageNamespace must be the workspace namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.dependsOn) || object.spec.dependsOn.all(d, !has(d.namespace) || d.namespace == namespaceObject.metadata.name)",
		Message:    "spec.dependsOn must not name another namespace",
		Reason:     ptr(metav1.StatusReasonForbidden),
	},
	{
		Expression: "!has(object.spec.decryption) || (has(object.spec.decryption.secretRef) && has(object.spec.decryption.secretRef.name) && object.spec.decryption.secretRef.name != '')",
		MessageExpression: "'spec.decryption must name secretRef.name, a Secret in namespace ' + namespaceObject.metadata.name + " +
			"' holding the keys of the workspace: without it kustomize-controller decrypts with its own identity'",
		Reason: ptr(metav1.StatusReasonForbidden),
	},
}

// fluxSpecTypes are the spec types of the Flux kinds a tenant may hold, by "group/Kind": the
// fields the allowlist does not name are denied on the cluster (fluxFieldValidations).
var fluxSpecTypes = map[string]reflect.Type{
	"kustomize.toolkit.fluxcd.io/Kustomization": reflect.TypeFor[kustomizev1.KustomizationSpec](),
	"helm.toolkit.fluxcd.io/HelmRelease":        reflect.TypeFor[helmv2.HelmReleaseSpec](),
	"source.toolkit.fluxcd.io/GitRepository":    reflect.TypeFor[sourcev1.GitRepositorySpec](),
	"source.toolkit.fluxcd.io/OCIRepository":    reflect.TypeFor[sourcev1.OCIRepositorySpec](),
	"source.toolkit.fluxcd.io/HelmRepository":   reflect.TypeFor[sourcev1.HelmRepositorySpec](),
	"source.toolkit.fluxcd.io/HelmChart":        reflect.TypeFor[sourcev1.HelmChartSpec](),
}

// fluxSpecFields lists the spec fields of a Flux kind's API type (its JSON names), sorted; nil
// for a kind fleetbot has no type of.
func fluxSpecFields(group, kind string) []string {
	t, ok := fluxSpecTypes[group+"/"+kind]
	if !ok {
		return nil
	}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "" && f.Anonymous:
				walk(f.Type)
			case name != "" && name != "-":
				out = append(out, name)
			}
		}
	}
	walk(t)
	sort.Strings(out)
	return out
}

// fluxFieldValidations deny, on a Kustomization or HelmRelease admitted into a workspace
// namespace, every spec field of the Flux API type that the tenant allowlist does not name
// (kubeConfig has a rule of its own): the same fields check workspace refuses.
func fluxFieldValidations(kinds tenantKinds) []admissionv1.Validation {
	var out []admissionv1.Validation
	for _, key := range []string{"kustomize.toolkit.fluxcd.io/Kustomization", "helm.toolkit.fluxcd.io/HelmRelease"} {
		k, ok := kinds[key]
		if !ok {
			continue
		}
		group, kind, _ := strings.Cut(key, "/")
		for _, f := range fluxSpecFields(group, kind) {
			if f == "kubeConfig" || slices.Contains(k.Fields, f) {
				continue
			}
			out = append(out, admissionv1.Validation{
				Expression: "object.kind != '" + kind + "' || !has(object.spec." + f + ")",
				Message:    "spec." + f + " is not allowed in a workspace's " + kind + " (fleetbot's tenant allowlist): remove it, or ask the platform admins to allow it under spec.tenants.allow in platform.yaml",
				Reason:     ptr(metav1.StatusReasonForbidden),
			})
		}
	}
	return out
}

// tenantKindsValidation denies a workspace's ServiceAccount (the one its Flux objects
// impersonate) creating or updating an object of a kind the tenant allowlist does not list.
func tenantKindsValidation(kinds tenantKinds) admissionv1.Validation {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, "'"+k+"'")
	}
	sort.Strings(keys)
	return admissionv1.Validation{
		Expression: "request.userInfo.username != 'system:serviceaccount:' + namespaceObject.metadata.name + ':' + variables.serviceAccount || " +
			"(request.kind.group + '/' + request.kind.kind) in [" + strings.Join(keys, ", ") + "]",
		MessageExpression: "'kind ' + request.kind.kind + (request.kind.group == '' ? '' : '.' + request.kind.group) + " +
			"' is not allowed in a workspace (the tenant allowlist of fleetbot): remove it from the workspace repo, or ask the platform admins to add it under spec.tenants.allow in platform.yaml'",
		Reason: ptr(metav1.StatusReasonForbidden),
	}
}

// tenancyPolicy renders platform/fleetbot.flux-tenancy/policy.yaml: a
// ValidatingAdmissionPolicy denying, in every namespace labelled
// WorkspaceLabel, a Flux Kustomization or HelmRelease that does not
// impersonate the workspace's ServiceAccount (the label's value), carries
// spec.kubeConfig, references another namespace, decrypts without a Secret of
// its own or sets a field the tenant allowlist does not name; a second one
// holding the workspace's ServiceAccount to the allowlist's kinds; and their
// bindings. It is the same in every cluster repo of a platform, and defends
// the cluster even where the lockdown flags were removed from flux-system.
func tenancyPolicy(kinds tenantKinds) ([]byte, error) {
	fail := admissionv1.Fail
	equivalent := admissionv1.Equivalent
	labels := map[string]string{managedByLabel: "fleetbot"}
	ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
	return marshalAll(managedHeader,
		&admissionv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: tenancyPolicyName, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionv1.MatchResources{
					MatchPolicy: &equivalent,
					ResourceRules: []admissionv1.NamedRuleWithOperations{
						{RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
							APIGroups: []string{"kustomize.toolkit.fluxcd.io"}, APIVersions: []string{"*"}, Resources: []string{"kustomizations"},
						}}},
						{RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
							APIGroups: []string{"helm.toolkit.fluxcd.io"}, APIVersions: []string{"*"}, Resources: []string{"helmreleases"},
						}}},
					},
				},
				Variables: []admissionv1.Variable{{
					Name:       "serviceAccount",
					Expression: "namespaceObject.metadata.labels['" + WorkspaceLabel + "']",
				}},
				Validations: append(slices.Clone(tenancyValidations), fluxFieldValidations(kinds)...),
			},
		},
		&admissionv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: tenancyPolicyName, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        tenancyPolicyName,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
				MatchResources: &admissionv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: WorkspaceLabel, Operator: metav1.LabelSelectorOpExists},
					}},
				},
			},
		},
		&admissionv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: tenantKindsPolicyName, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionv1.MatchResources{
					MatchPolicy: &equivalent,
					ResourceRules: []admissionv1.NamedRuleWithOperations{
						{RuleWithOperations: admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{
							APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: ptr(admissionv1.NamespacedScope),
						}}},
					},
				},
				Variables: []admissionv1.Variable{{
					Name:       "serviceAccount",
					Expression: "namespaceObject.metadata.labels['" + WorkspaceLabel + "']",
				}},
				Validations: []admissionv1.Validation{tenantKindsValidation(kinds)},
			},
		},
		&admissionv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: tenantKindsPolicyName, Labels: labels},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        tenantKindsPolicyName,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
				MatchResources: &admissionv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: WorkspaceLabel, Operator: metav1.LabelSelectorOpExists},
					}},
				},
			},
		},
	)
}

func ptr[T any](v T) *T { return &v }

// tenancy returns platform/fleetbot.flux-tenancy/policy.yaml through the run's
// memo: it is the same on every cluster.
func (x *run) tenancy() ([]byte, error) {
	if x.tenancyPolicy == nil {
		var allow []control.TenantKind
		if x.repo.Platform != nil {
			allow = x.repo.Platform.Spec.Tenants.Allow
		}
		b, err := tenancyPolicy(newTenantKinds(allow))
		if err != nil {
			return nil, err
		}
		x.tenancyPolicy = b
	}
	return x.tenancyPolicy, nil
}
