package fanout

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// DefaultTenantKinds is what a workspace repo may hold when the platform adds nothing
// (platform.yaml spec.tenants.allow extends it): the namespaced kinds of an application, its
// Roles and RoleBindings (held to the workspace's own rights, see rbacFindings) and the Flux
// kinds a tenant needs, each with the spec fields it may set. Anything else in a workspace
// repo is refused: a kind nobody listed is a kind nobody reviewed.
func DefaultTenantKinds() []control.TenantKind {
	return []control.TenantKind{
		{APIGroup: "", Kind: "ConfigMap"},
		{APIGroup: "", Kind: "Secret"},
		{APIGroup: "", Kind: "Service"},
		{APIGroup: "", Kind: "ServiceAccount"},
		{APIGroup: "", Kind: "PersistentVolumeClaim"},
		{APIGroup: "", Kind: "Pod"},
		{APIGroup: "apps", Kind: "Deployment"},
		{APIGroup: "apps", Kind: "StatefulSet"},
		{APIGroup: "batch", Kind: "Job"},
		{APIGroup: "batch", Kind: "CronJob"},
		{APIGroup: "autoscaling", Kind: "HorizontalPodAutoscaler"},
		{APIGroup: "policy", Kind: "PodDisruptionBudget"},
		{APIGroup: "networking.k8s.io", Kind: "Ingress"},
		{APIGroup: "networking.k8s.io", Kind: "NetworkPolicy"},
		{APIGroup: "rbac.authorization.k8s.io", Kind: "Role"},
		{APIGroup: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
		{APIGroup: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization", Fields: []string{
			"buildMetadata", "commonMetadata", "components", "decryption", "deletionPolicy", "dependsOn", "force",
			"healthCheckExprs", "healthChecks", "ignore", "ignoreMissingComponents", "images", "interval", "namePrefix", "nameSuffix",
			"patches", "path", "postBuild", "prune", "retryInterval", "serviceAccountName", "sourceRef", "suspend",
			"targetNamespace", "timeout", "wait"}},
		{APIGroup: "helm.toolkit.fluxcd.io", Kind: "HelmRelease", Fields: []string{
			"chart", "chartRef", "commonMetadata", "dependsOn", "driftDetection", "healthCheckExprs", "install", "interval",
			"maxHistory", "persistentClient", "postRenderStrategy", "postRenderers", "releaseName", "rollback",
			"serviceAccountName", "storageNamespace", "suspend", "targetNamespace", "test", "timeout", "uninstall",
			"upgrade", "values", "valuesFrom", "waitStrategy"}},
		{APIGroup: "source.toolkit.fluxcd.io", Kind: "GitRepository", Fields: []string{
			"ignore", "include", "interval", "provider", "proxySecretRef", "recurseSubmodules", "ref", "secretRef",
			"sparseCheckout", "suspend", "timeout", "url", "verify"}},
		{APIGroup: "source.toolkit.fluxcd.io", Kind: "OCIRepository", Fields: []string{
			"certSecretRef", "ignore", "insecure", "interval", "layerSelector", "provider", "proxySecretRef", "ref",
			"secretRef", "serviceAccountName", "suspend", "timeout", "url", "verify"}},
		{APIGroup: "source.toolkit.fluxcd.io", Kind: "HelmRepository", Fields: []string{
			"certSecretRef", "insecure", "interval", "passCredentials", "provider", "secretRef", "suspend", "timeout",
			"type", "url"}},
		{APIGroup: "source.toolkit.fluxcd.io", Kind: "HelmChart", Fields: []string{
			"chart", "ignoreMissingValuesFiles", "interval", "reconcileStrategy", "sourceRef", "suspend", "valuesFiles",
			"verify", "version"}},
	}
}

// decryptionFields are the fields of a tenant Kustomization's spec.decryption.
var decryptionFields = []string{"provider", "secretRef", "serviceAccountName"}

// tenantKinds is an allowlist by "group/Kind".
type tenantKinds map[string]control.TenantKind

// newTenantKinds is DefaultTenantKinds with the platform's extension: an extension entry for a
// kind of the default list replaces it (a Flux kind's fields with the platform's).
func newTenantKinds(extra []control.TenantKind) tenantKinds {
	out := tenantKinds{}
	for _, k := range append(DefaultTenantKinds(), extra...) {
		out[k.APIGroup+"/"+k.Kind] = k
	}
	return out
}

// names lists the allowed kinds as "Kind (group)", sorted, for a hint.
func (t tenantKinds) names() string {
	var out []string
	for _, k := range t {
		if k.APIGroup == "" {
			out = append(out, k.Kind)
		} else {
			out = append(out, k.Kind+"."+k.APIGroup)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// allowlistFindings checks one rendered object of a workspace repo against the allowlist: its
// kind must be listed, and a Flux object may set only the spec fields its entry names, with
// spec.decryption naming a Secret of the namespace. ok is false when the kind is not listed
// (nothing else about the object matters then).
func (t tenantKinds) allowlistFindings(obj map[string]any, ns string) (out []tenantFinding, ok bool) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group := ""
	if g, _, found := strings.Cut(apiVersion, "/"); found {
		group = g
	}
	entry, listed := t[group+"/"+kind]
	if !listed {
		what := kind
		if group != "" {
			what += "." + group
		}
		return []tenantFinding{{
			Message: fmt.Sprintf("kind %s is not allowed in a workspace repo: a workspace may hold only the kinds of the tenant allowlist", what),
			Hint:    "use one of: " + t.names() + "; or ask the platform admins to add " + what + " under spec.tenants.allow in platform.yaml",
		}}, false
	}
	if _, isFlux := fluxGroup(apiVersion); !isFlux {
		return nil, true
	}
	spec, _ := obj["spec"].(map[string]any)
	keys := make([]string, 0, len(spec))
	for k := range spec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "kubeConfig" {
			continue // tenantFlux says why
		}
		if !slices.Contains(entry.Fields, k) {
			out = append(out, tenantFinding{Path: []string{"spec", k},
				Message: fmt.Sprintf("sets spec.%s, which a workspace's %s may not use: its controller acts on it with its own rights", k, kind),
				Hint:    fmt.Sprintf("remove spec.%s (allowed: %s), or ask the platform admins to allow it under spec.tenants.allow in platform.yaml", k, strings.Join(entry.Fields, ", "))})
		}
	}
	if group == "kustomize.toolkit.fluxcd.io" && kind == "Kustomization" {
		out = append(out, decryptionFindings(spec, ns)...)
	}
	return out, true
}

// decryptionFindings refuses a Kustomization's spec.decryption that names no Secret: without
// one, kustomize-controller decrypts with its own identity (its cloud KMS credentials, its
// keys), so a tenant could have secrets encrypted for the platform (readable in the cluster
// repos) decrypted into its namespace.
func decryptionFindings(spec map[string]any, ns string) []tenantFinding {
	d, has := spec["decryption"]
	if !has {
		return nil
	}
	dm, _ := d.(map[string]any)
	var out []tenantFinding
	for _, k := range sortedKeys(dm) {
		if !slices.Contains(decryptionFields, k) {
			out = append(out, tenantFinding{Path: []string{"spec", "decryption", k},
				Message: fmt.Sprintf("sets spec.decryption.%s, which a workspace's Kustomization may not use", k),
				Hint:    "remove it (allowed: " + strings.Join(decryptionFields, ", ") + ")"})
		}
	}
	ref, _ := dm["secretRef"].(map[string]any)
	if name, _ := ref["name"].(string); name == "" {
		out = append(out, tenantFinding{Path: []string{"spec", "decryption"},
			Message: "has spec.decryption without secretRef.name: kustomize-controller would decrypt with its own identity, so secrets encrypted for the platform could be decrypted into namespace " + ns,
			Hint:    "set spec.decryption.secretRef.name to a Secret in namespace " + ns + " holding the workspace's own decryption keys (e.g. sops-age)"})
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
