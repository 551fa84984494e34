package fanout

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/yaml"
)

// aggregateRoles are the ClusterRoles Kubernetes aggregates into admin, edit and view, verbatim
// from the RBAC bootstrap policy of k8s.io/kubernetes (scripts/rbac-roles.sh writes the file;
// e2e compares it with what a real API server aggregates).
//
//go:embed rbac/aggregate-roles.yaml
var aggregateRoles []byte

// tenantRole is the ClusterRole a workspace's ServiceAccount is bound to in its namespace (the
// RoleBinding <workspace>-reconciler of flux/fleetbot.yaml): what its Flux objects may create.
const tenantRole = "admin"

// AdminRules returns the rules of ClusterRole admin as Kubernetes aggregates them: the rules of
// system:aggregate-to-admin, -edit and -view (admin selects the roles labelled
// aggregate-to-admin, among them edit, which selects those labelled aggregate-to-edit, among
// them view).
func AdminRules() ([]rbacv1.PolicyRule, error) {
	var list struct {
		Items []rbacv1.ClusterRole `json:"items"`
	}
	if err := yaml.Unmarshal(aggregateRoles, &list); err != nil {
		return nil, fmt.Errorf("reading the embedded aggregate ClusterRoles: %w", err)
	}
	var rules []rbacv1.PolicyRule
	for _, r := range list.Items {
		switch r.Name {
		case "system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view":
			rules = append(rules, r.Rules...)
		}
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("the embedded aggregate ClusterRoles hold no rules")
	}
	return rules, nil
}

// escalatingVerbs let whoever holds them step past RBAC's escalation check (escalate, bind) or
// act as someone else (impersonate). A workspace never grants them, whatever it holds.
var escalatingVerbs = []string{"escalate", "bind", "impersonate", "*"}

// boundClusterRoles are the ClusterRoles a workspace may bind in its namespace: admin, which
// its ServiceAccount holds there, and the two it aggregates.
var boundClusterRoles = []string{"admin", "edit", "view"}

// rbacFindings applies Kubernetes' RBAC escalation rule to a Role or RoleBinding of a workspace
// repo, offline: a tenant may grant or bind only what its ServiceAccount holds (ClusterRole
// admin in its namespace; rbacvalidation.Covers is the API server's own comparison), and never
// escalate, bind or impersonate. roles are the Roles the same build renders, by name.
func rbacFindings(obj map[string]any, admin []rbacv1.PolicyRule, roles map[string]bool) []tenantFinding {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if !strings.HasPrefix(apiVersion, rbacv1.GroupName+"/") {
		return nil
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return []tenantFinding{{Message: "cannot be read: " + err.Error()}}
	}
	switch kind {
	case "Role":
		var r rbacv1.Role
		if err := json.Unmarshal(data, &r); err != nil {
			return []tenantFinding{{Message: "cannot be read as a Role: " + err.Error() + "; the API server would refuse it", Hint: "fix the rules' field types"}}
		}
		return roleFindings(r.Rules, admin)
	case "RoleBinding":
		var b rbacv1.RoleBinding
		if err := json.Unmarshal(data, &b); err != nil {
			return []tenantFinding{{Message: "cannot be read as a RoleBinding: " + err.Error() + "; the API server would refuse it", Hint: "fix the roleRef's field types"}}
		}
		return bindingFindings(b.RoleRef, roles)
	}
	return nil
}

// roleFindings checks each rule of a Role: no escalating verb, and nothing ClusterRole admin
// does not grant.
func roleFindings(rules []rbacv1.PolicyRule, admin []rbacv1.PolicyRule) []tenantFinding {
	var out []tenantFinding
	for i, rule := range rules {
		at := []string{"rules", fmt.Sprint(i)}
		var bad []string
		for _, v := range rule.Verbs {
			if slices.Contains(escalatingVerbs, strings.ToLower(v)) {
				bad = append(bad, v)
			}
		}
		if len(bad) > 0 {
			out = append(out, tenantFinding{Path: append(at, "verbs"),
				Message: fmt.Sprintf("grants verb %s: a workspace may never grant escalate, bind or impersonate (they step past RBAC's escalation check or act as another identity)", strings.Join(bad, ", ")),
				Hint:    "list the verbs the role needs explicitly (get, list, watch, create, update, patch, delete)"})
			continue
		}
		if ok, missing := rbacvalidation.Covers(admin, []rbacv1.PolicyRule{rule}); !ok {
			out = append(out, tenantFinding{Path: at,
				Message: fmt.Sprintf("grants %s, which the workspace's ServiceAccount does not hold (ClusterRole %s in its namespace): Kubernetes refuses a Role beyond its creator's rights", describeRules(missing), tenantRole),
				Hint:    "grant only what ClusterRole admin grants in the namespace; cluster-wide rights are the platform admins' to give"})
		}
	}
	return out
}

// bindingFindings checks a RoleBinding's roleRef: a Role of the repo, or admin, edit or view.
func bindingFindings(ref rbacv1.RoleRef, roles map[string]bool) []tenantFinding {
	at := []string{"roleRef", "name"}
	switch {
	case ref.Kind == "ClusterRole" && ref.Name == "cluster-admin":
		return []tenantFinding{{Path: at,
			Message: "binds ClusterRole cluster-admin: it grants every right on every object of the namespace, beyond what the workspace's ServiceAccount (admin) holds; Kubernetes refuses the binding",
			Hint:    "bind ClusterRole admin, edit or view, or a Role of this repo"}}
	case ref.Kind == "ClusterRole" && slices.Contains(boundClusterRoles, ref.Name):
		return nil
	case ref.Kind == "ClusterRole":
		return []tenantFinding{{Path: at,
			Message: fmt.Sprintf("binds ClusterRole %s: a workspace may bind only admin, edit, view or a Role of its own repo, whose rights check workspace can hold to the workspace's", ref.Name),
			Hint:    "bind ClusterRole admin, edit or view, or define a Role in this repo with the rules needed"}}
	case ref.Kind == "Role" && !roles[ref.Name]:
		return []tenantFinding{{Path: at,
			Message: fmt.Sprintf("binds Role %s, which this repo does not define: its rights cannot be checked", ref.Name),
			Hint:    "define Role " + ref.Name + " in this repo beside the binding"}}
	case ref.Kind != "Role" && ref.Kind != "ClusterRole":
		return []tenantFinding{{Path: []string{"roleRef", "kind"},
			Message: fmt.Sprintf("has roleRef.kind %q", ref.Kind), Hint: "use Role or ClusterRole"}}
	}
	return nil
}

// describeRules renders rules as "verbs on resources (group)" for a message.
func describeRules(rules []rbacv1.PolicyRule) string {
	var out []string
	for i, r := range rules {
		if i == 3 {
			out = append(out, fmt.Sprintf("and %d more", len(rules)-3))
			break
		}
		switch {
		case len(r.NonResourceURLs) > 0:
			out = append(out, strings.Join(r.Verbs, ",")+" on "+strings.Join(r.NonResourceURLs, ","))
		default:
			groups := make([]string, len(r.APIGroups))
			for j, g := range r.APIGroups {
				if g == "" {
					g = "core"
				}
				groups[j] = g
			}
			s := strings.Join(r.Verbs, ",") + " on " + strings.Join(r.Resources, ",") + " (" + strings.Join(groups, ",") + ")"
			if len(r.ResourceNames) > 0 {
				s += " named " + strings.Join(r.ResourceNames, ",")
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}
