package fanout

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// PodSecurityVersion is the Pod Security Standards version fleetbot pins in every namespace it
// labels (pod-security.kubernetes.io/enforce-version and friends) and evaluates pods against
// offline: the version of the k8s.io/pod-security-admission module fleetbot is built with
// (TestPodSecurityVersionIsTheModules), so check workspace's verdict is the API server's. A
// newer fleetbot moves it in a pull request like any other change.
const PodSecurityVersion = "v1.36"

// podSecurityLabels are the Pod Security Admission labels of a namespace enforcing level:
// audit and warn are always restricted, so whatever would fail the strictest level is
// visible (in the audit log, and as a warning to whoever applies it) before anyone raises it.
func podSecurityLabels(level string) [][2]string {
	return [][2]string{
		{psaapi.EnforceLevelLabel, level},
		{psaapi.EnforceVersionLabel, PodSecurityVersion},
		{psaapi.AuditLevelLabel, control.PodSecurityRestricted},
		{psaapi.AuditVersionLabel, PodSecurityVersion},
		{psaapi.WarnLevelLabel, control.PodSecurityRestricted},
		{psaapi.WarnVersionLabel, PodSecurityVersion},
	}
}

// labelNamespace sets the Pod Security labels on a Namespace object a platform component
// renders: the level the component declares in platform.yaml (declared), else the enforce
// level the app's manifest already sets, else control.DefaultComponentPodSecurity.
func labelNamespace(n *kyaml.RNode, declared string) error {
	level := declared
	if level == "" {
		level = n.GetLabels()[psaapi.EnforceLevelLabel]
	}
	if level == "" {
		level = control.DefaultComponentPodSecurity
	}
	labels, err := n.Pipe(kyaml.LookupCreate(kyaml.MappingNode, "metadata", "labels"))
	if err != nil {
		return fmt.Errorf("reading the labels: %w", err)
	}
	for _, l := range podSecurityLabels(level) {
		if err := labels.PipeE(kyaml.SetField(l[0], kyaml.NewScalarRNode(l[1]))); err != nil {
			return fmt.Errorf("setting label %s: %w", l[0], err)
		}
	}
	return nil
}

// componentPodSecurity is the Pod Security level platform.yaml declares for the component of
// app ("" when it declares none).
func (x *run) componentPodSecurity(app string) string {
	if x.repo.Platform == nil {
		return ""
	}
	for _, c := range x.repo.Platform.Spec.Components {
		if c.App == app {
			return c.PodSecurity
		}
	}
	return ""
}

// newPodSecurityEvaluator is the upstream evaluator with the checks the API server enables by
// default.
func newPodSecurityEvaluator() (psapolicy.Evaluator, error) {
	return psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
}

// podTemplate is one pod a rendered object asks for: its metadata and spec, and the path of
// the spec in the object (for the line of a finding).
type podTemplate struct {
	path []string
	meta metav1.ObjectMeta
	spec corev1.PodSpec
}

// podTemplatePaths are where each workload kind keeps the pod it creates (the object itself for
// a Pod).
var podTemplatePaths = map[string][]string{
	"Pod":                   nil,
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// workloadGroups are the API groups of the workload kinds above.
var workloadGroups = map[string]bool{"": true, "apps": true, "batch": true, "extensions": true}

// podTemplates lists the pods a rendered object asks for: the pod template of a workload kind,
// and in a HelmRelease's spec.values every mapping shaped like a pod spec (a containers list of
// mappings with a name or an image) or a pod template (a spec holding one), wherever the chart
// keeps it. Chart values in other shapes (a chart's own securityContext keys) are not
// recognisable offline: the namespace's Pod Security label refuses their pods on the cluster.
func podTemplates(obj map[string]any) ([]podTemplate, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	if at, ok := podTemplatePaths[kind]; ok && workloadGroups[group] {
		tmpl := lookup(obj, at)
		m, _ := tmpl.(map[string]any)
		if m == nil {
			return nil, nil
		}
		pt, err := decodePodTemplate(m, at, append(at[:len(at):len(at)], "spec"))
		if err != nil {
			return nil, err
		}
		return []podTemplate{pt}, nil
	}
	if group == "helm.toolkit.fluxcd.io" && kind == "HelmRelease" {
		var out []podTemplate
		var firstErr error
		walkPodSpecs(lookup(obj, []string{"spec", "values"}), []string{"spec", "values"}, func(at []string, m map[string]any) {
			pt, err := decodePodTemplate(m, at, at)
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out = append(out, pt)
		})
		return out, firstErr
	}
	return nil, nil
}

// walkPodSpecs calls found with every mapping under v shaped like a pod spec (at its path), as
// a pod template ({spec}) so both forms decode the same way.
func walkPodSpecs(v any, at []string, found func(at []string, tmpl map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		if podSpecShaped(x) {
			found(at[:len(at):len(at)], map[string]any{"spec": x})
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkPodSpecs(x[k], append(at[:len(at):len(at)], k), found)
		}
	case []any:
		for i, e := range x {
			walkPodSpecs(e, append(at[:len(at):len(at)], fmt.Sprint(i)), found)
		}
	}
}

// podSpecShaped reports whether m looks like a pod spec: a containers list whose entries are
// mappings with a name or an image.
func podSpecShaped(m map[string]any) bool {
	cs, ok := m["containers"].([]any)
	if !ok || len(cs) == 0 {
		return false
	}
	for _, c := range cs {
		cm, ok := c.(map[string]any)
		if !ok {
			return false
		}
		if _, named := cm["name"]; !named {
			if _, image := cm["image"]; !image {
				return false
			}
		}
	}
	return true
}

// decodePodTemplate reads a pod template ({metadata, spec}) found at at, whose spec is at
// specAt, as the API types the evaluator takes. A field of the wrong type is an error: the API
// server would refuse the object.
func decodePodTemplate(m map[string]any, at, specAt []string) (podTemplate, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return podTemplate{}, err
	}
	var t corev1.PodTemplateSpec
	if err := json.Unmarshal(data, &t); err != nil {
		return podTemplate{}, fmt.Errorf("the pod at %s cannot be read as a Kubernetes pod: %w", strings.Join(at, "."), err)
	}
	return podTemplate{path: specAt, meta: t.ObjectMeta, spec: t.Spec}, nil
}

// lookup returns the value at path under obj, or nil.
func lookup(obj map[string]any, path []string) any {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// podSecurityFindings evaluates every pod a rendered object of a workspace asks for against the
// Pod Security level of its namespace, offline, with the upstream policy package the API server
// uses: a pod it would refuse is a finding naming each failing check and what to do.
func podSecurityFindings(ev psapolicy.Evaluator, obj map[string]any, level string) []tenantFinding {
	if level == "" || level == control.PodSecurityPrivileged {
		return nil
	}
	templates, err := podTemplates(obj)
	if err != nil {
		return []tenantFinding{{Message: err.Error() + "; the API server would refuse it", Hint: "fix the pod template's field types (kubectl explain pod.spec)"}}
	}
	if len(templates) == 0 {
		return nil
	}
	version, err := psaapi.ParseVersion(PodSecurityVersion)
	if err != nil {
		return []tenantFinding{{Message: "the Pod Security version cannot be read: " + err.Error()}}
	}
	lv := psaapi.LevelVersion{Level: psaapi.Level(level), Version: version}
	var out []tenantFinding
	for _, t := range templates {
		res := psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &t.meta, &t.spec))
		if res.Allowed {
			continue
		}
		out = append(out, tenantFinding{Path: t.path,
			Message: fmt.Sprintf("violates PodSecurity %q: %s: the namespace's Pod Security admission refuses its pods", lv.String(), res.ForbiddenDetail()),
			Hint:    podSecurityHint(res.ForbiddenReasons, level)})
	}
	return out
}

// podSecurityFixes says what to change for each failing check, by its forbidden reason (the
// upstream checks' own words).
var podSecurityFixes = map[string]string{
	"privileged":                        "remove securityContext.privileged",
	"host namespaces":                   "remove hostNetwork, hostPID and hostIPC",
	"hostPath volumes":                  "use a persistentVolumeClaim, configMap, secret or emptyDir volume instead of hostPath",
	"hostPort":                          "remove the containers' hostPort (expose the pod through a Service)",
	"non-default capabilities":          "drop the added capabilities (securityContext.capabilities.add)",
	"unrestricted capabilities":         "set securityContext.capabilities.drop: [ALL] in every container (add only NET_BIND_SERVICE)",
	"allowPrivilegeEscalation != false": "set securityContext.allowPrivilegeEscalation: false in every container",
	"runAsNonRoot != true":              "set securityContext.runAsNonRoot: true (pod or every container) and run the image as a non-root user",
	"runAsUser=0":                       "set securityContext.runAsUser to a non-zero user id",
	"seccompProfile":                    "set securityContext.seccompProfile.type: RuntimeDefault (pod or every container)",
	"restricted volume types":           "use only configMap, secret, emptyDir, projected, downwardAPI, persistentVolumeClaim, ephemeral or csi volumes",
	"procMount":                         "remove securityContext.procMount",
	"forbidden sysctls":                 "remove the unsafe sysctls from securityContext.sysctls",
	"seLinuxOptions":                    "remove securityContext.seLinuxOptions type and user/role",
	"forbidden AppArmor profile":        "use the RuntimeDefault or a Localhost AppArmor profile",
	"forbidden AppArmor profiles":       "use the RuntimeDefault or a Localhost AppArmor profile",
	"hostProcess":                       "remove windowsOptions.hostProcess",
	"probe or lifecycle host":           "remove the host from the probes' and lifecycle handlers' httpGet/tcpSocket",
}

// podSecurityHint joins the fixes for the failing checks, and says where the level comes from.
func podSecurityHint(reasons []string, level string) string {
	var fixes []string
	for _, r := range reasons {
		if f, ok := podSecurityFixes[r]; ok {
			fixes = append(fixes, f)
		} else {
			fixes = append(fixes, "fix "+r)
		}
	}
	hint := strings.Join(fixes, "; ") + " (https://kubernetes.io/docs/concepts/security/pod-security-standards/#" + level + ")"
	if level == control.PodSecurityRestricted {
		hint += "; if the workload cannot run restricted, ask the platform admins for spec.podSecurity: baseline on the workspace"
	}
	return hint
}
