package fanout

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// tenancyPolicy renders platform/fleetbot.flux-tenancy/policy.yaml: a
// ValidatingAdmissionPolicy denying, in every namespace labelled
// WorkspaceLabel, a Flux Kustomization or HelmRelease that does not
// impersonate the workspace's ServiceAccount (the label's value), carries
// spec.kubeConfig or references another namespace; and its binding. It is
// the same in every cluster repo, and defends the cluster even where the
// lockdown flags were removed from flux-system.
func tenancyPolicy() ([]byte, error) {
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
				Validations: tenancyValidations,
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
	)
}

func ptr[T any](v T) *T { return &v }

// tenancy returns platform/fleetbot.flux-tenancy/policy.yaml through the run's
// memo: it is the same on every cluster.
func (x *run) tenancy() ([]byte, error) {
	if x.tenancyPolicy == nil {
		b, err := tenancyPolicy()
		if err != nil {
			return nil, err
		}
		x.tenancyPolicy = b
	}
	return x.tenancyPolicy, nil
}
