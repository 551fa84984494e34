package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	valueNameRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	teamSlugRe     = regexp.MustCompile(`^[a-z0-9._-]+$`)
	repoNameRe     = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	fluxIntervalRe = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`)
	percentRe      = regexp.MustCompile(`^([0-9]+)%$`)
	fieldIndexRe   = regexp.MustCompile(`\[(\d+)\]`)
)

// systemNamespaces belong to Kubernetes or Flux (and so does every kube-* namespace, see
// SystemNamespace): no workspace or component may own one.
var systemNamespaces = map[string]bool{
	"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true, "flux-system": true,
}

// FleetbotNamespace is where fleetbot's own deployment runs (deploy/base): it holds the App's
// private key, so no workspace or component may own it.
const FleetbotNamespace = "fleetbot"

// SystemNamespace reports whether ns belongs to Kubernetes or Flux: default, flux-system and
// every kube-* namespace.
func SystemNamespace(ns string) bool {
	return systemNamespaces[ns] || strings.HasPrefix(ns, "kube-")
}

const (
	dnsLabelHint = "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
	teamHint     = "use the team's slug as in its GitHub URL: lowercase letters, digits, '-', '_' and '.'"
)

// validate checks a loaded control repo against the contract and returns every problem,
// sorted, each at the file:line of the offending field. A missing Platform is not reported
// here: Load has already said so more precisely (missing, unparsable, ...).
func validate(r *Repo) Issues {
	return (&validator{r: r}).run()
}

type validator struct {
	r  *Repo
	is Issues
}

func (v *validator) run() Issues {
	if p := v.r.Platform; p != nil {
		v.platform(p)
	}
	for _, c := range v.r.Clusters {
		v.cluster(c)
	}
	for _, w := range v.r.Workspaces {
		v.workspace(w)
	}
	for _, a := range v.r.Apps {
		v.app(a)
	}
	v.duplicates()
	v.namespaceOwners()
	v.repoNames()
	v.values()
	v.dependsOn()
	v.provision()
	v.is.Sort()
	return v.is
}

func (v *validator) add(pos Position, hint, format string, args ...any) {
	v.is.Add(pos, hint, format, args...)
}

// meta checks what every object has: apiVersion, kind, a DNS-1123 name and
// valid labels.
func (v *validator) meta(tm TypeMeta, m Meta, src Source, kind string) {
	switch tm.APIVersion {
	case APIVersion:
	case "":
		v.add(src.At("apiVersion"), "add apiVersion: "+APIVersion, "apiVersion is missing")
	default:
		v.add(src.At("apiVersion"), "use apiVersion: "+APIVersion, "apiVersion %q is not supported", tm.APIVersion)
	}
	switch tm.Kind {
	case kind:
	case "":
		v.add(src.At("kind"), "add kind: "+kind, "kind is missing")
	default:
		v.add(src.At("kind"), "use kind: "+kind+" here, or move the object to "+kindHome(tm.Kind), "kind %q where a %s is expected", tm.Kind, kind)
	}
	if m.Name == "" {
		v.add(src.At("metadata.name"), "set metadata.name", "metadata.name is required")
	} else if errs := validation.IsDNS1123Label(m.Name); len(errs) > 0 {
		v.add(src.At("metadata.name"), dnsLabelHint, "invalid name %q: %s", m.Name, strings.Join(errs, "; "))
	}
	v.labels(m.Labels, src, "metadata.labels")
}

func (v *validator) labels(set map[string]string, src Source, path string) {
	for _, k := range slices.Sorted(maps.Keys(set)) {
		pos := src.At(path + "." + k)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.add(pos, "label keys are [prefix/]name: name at most 63 alphanumerics, '-', '_' or '.'", "invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(set[k]); len(errs) > 0 {
			v.add(pos, "label values are at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric", "invalid value %q of label %q: %s", set[k], k, strings.Join(errs, "; "))
		}
	}
}

func (v *validator) teams(teams []string, src Source, path string) {
	seen := map[string]int{}
	for i, t := range teams {
		pos := src.At(fmt.Sprintf("%s.%d", path, i))
		if !teamSlugRe.MatchString(t) {
			v.add(pos, teamHint, "invalid team slug %q", t)
		}
		if j, dup := seen[t]; dup {
			v.add(pos, "remove the duplicate", "team %q is listed twice (first at %s)", t, src.At(fmt.Sprintf("%s.%d", path, j)))
		}
		seen[t] = i
	}
}

func (v *validator) platform(p *Platform) {
	src := p.Source
	v.meta(p.TypeMeta, p.Metadata, src, KindPlatform)
	s := p.Spec
	if s.Owner == "" {
		v.add(src.At("spec.owner"), "set spec.owner to the GitHub org (or user) that owns the target repos", "spec.owner is required")
	} else if !validLogin(s.Owner) {
		v.add(src.At("spec.owner"), "a GitHub login has at most 39 letters, digits or single hyphens, not starting or ending with a hyphen",
			"invalid GitHub owner %q", s.Owner)
	}
	if len(s.Admins) == 0 {
		v.add(src.At("spec.admins"), "list the platform admin team slugs, e.g. admins: [platform]", "spec.admins must name at least one team")
	}
	v.teams(s.Admins, src, "spec.admins")
	if !validRef(s.DefaultBranch) {
		v.add(src.At("spec.defaultBranch"), "use a valid git branch name such as main", "invalid branch name %q", s.DefaultBranch)
	}
	v.pattern(s.Repos.Cluster, src, "spec.repos.cluster")
	v.pattern(s.Repos.Workspace, src, "spec.repos.workspace")
	if s.Repos.Control != "" {
		if msg := repoNameProblem(s.Repos.Control); msg != "" {
			v.add(src.At("spec.repos.control"), "name the control repo as on GitHub, without the owner (e.g. fleet-control)",
				"control repo name %q %s", s.Repos.Control, msg)
		}
	}
	switch s.Repos.Visibility {
	case "private", "internal", "public":
	default:
		v.add(src.At("spec.repos.visibility"), "use private, internal or public", "invalid visibility %q", s.Repos.Visibility)
	}
	if !validRef(s.PullRequests.Branch) {
		v.add(src.At("spec.pullRequests.branch"), "use a valid git branch name such as fleetbot/sync", "invalid branch name %q", s.PullRequests.Branch)
	} else if s.PullRequests.Branch == s.DefaultBranch {
		v.add(src.At("spec.pullRequests.branch"), "use a branch of its own such as fleetbot/sync",
			"the pull request branch cannot be the default branch %q", s.DefaultBranch)
	}
	for i, l := range s.PullRequests.Labels {
		if strings.TrimSpace(l) == "" || len(l) > 50 {
			v.add(src.At(fmt.Sprintf("spec.pullRequests.labels.%d", i)), "GitHub labels are 1 to 50 characters", "invalid label %q", l)
		}
	}
	switch s.PullRequests.Merge {
	case MergeManual, MergeAuto:
	default:
		v.add(src.At("spec.pullRequests.merge"), "use manual or auto", "invalid merge mode %q", s.PullRequests.Merge)
	}
	if d, err := time.ParseDuration(s.Flux.Interval); !fluxIntervalRe.MatchString(s.Flux.Interval) || err != nil || d <= 0 {
		v.add(src.At("spec.flux.interval"), "use a positive Flux duration such as 30s, 10m or 1h30m", "invalid flux interval %q", s.Flux.Interval)
	}
	if ref := s.Flux.SecretRef; ref != nil && *ref != "" {
		if errs := validation.IsDNS1123Subdomain(*ref); len(errs) > 0 {
			v.add(src.At("spec.flux.secretRef"), `name a Kubernetes Secret: lowercase letters, digits, '-' and '.' (or "" for none)`,
				"invalid flux secretRef %q: %s", *ref, strings.Join(errs, "; "))
		}
	}
	switch s.Access.Mode {
	case AccessEnforce, AccessAdditive:
	default:
		v.add(src.At("spec.access.mode"), "use enforce or additive", "invalid access mode %q", s.Access.Mode)
	}
	v.countOrPercent(s.MaxRemovals, src, "spec.maxRemovals")
	v.countOrPercent(s.Access.MaxAccessRemovals, src, "spec.access.maxAccessRemovals")
	v.branchRules(s.Access.BranchRules, s.Owner, src)

	seen := map[string]int{}
	for i, comp := range s.Components {
		path := fmt.Sprintf("spec.components.%d", i)
		v.appRef(comp.App, src, path, seen, i, "platform components")
		v.selector(comp.ClusterSelector, src, path+".clusterSelector")
		v.entryValues(comp.App, comp.Values, src, path+".values")
		switch comp.PodSecurity {
		case "", PodSecurityPrivileged, PodSecurityBaseline, PodSecurityRestricted:
		default:
			v.add(src.At(path+".podSecurity"), "use privileged, baseline or restricted (Kubernetes' Pod Security levels)",
				"invalid Pod Security level %q", comp.PodSecurity)
		}
		if comp.Rollout != nil {
			v.waves(comp.Rollout.Waves, src, path+".rollout.waves")
		}
	}
	v.rollout(s.Rollout, src)
	v.tenants(s.Tenants, src)
	for i, name := range s.RetiredClusters {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			v.add(src.At(fmt.Sprintf("spec.retiredClusters.%d", i)), dnsLabelHint, "invalid retired cluster name %q: %s", name, strings.Join(errs, "; "))
		}
	}
}

// tenants checks the platform's extension of the tenant allowlist: namespaced kinds named by
// API group and kind, and for a Flux kind the spec fields its tenant objects may set.
func (v *validator) tenants(t TenantSpec, src Source) {
	seen := map[string]int{}
	for i, k := range t.Allow {
		path := fmt.Sprintf("spec.tenants.allow.%d", i)
		if k.APIGroup != "" {
			if errs := validation.IsDNS1123Subdomain(k.APIGroup); len(errs) > 0 {
				v.add(src.At(path+".apiGroup"), `name the API group as in apiVersion before the "/" (e.g. monitoring.coreos.com; "" for the core group)`,
					"invalid API group %q: %s", k.APIGroup, strings.Join(errs, "; "))
			}
		}
		if k.Kind == "" {
			v.add(src.At(path), "set kind: to the object kind, e.g. ServiceMonitor", "kind is required")
			continue
		}
		key := k.APIGroup + "/" + k.Kind
		if j, dup := seen[key]; dup {
			v.add(src.At(path+".kind"), "merge the two entries into one", "kind %s is listed twice (first at %s)", key, src.At(fmt.Sprintf("spec.tenants.allow.%d", j)))
		}
		seen[key] = i
		if strings.HasSuffix(k.APIGroup, ".toolkit.fluxcd.io") {
			if len(k.Fields) == 0 {
				v.add(src.At(path), "list under fields: the spec fields a tenant's "+k.Kind+" may set",
					"%s is a Flux kind: its controller acts on it with its own rights, so the spec fields a tenant may use must be named", key)
			}
			for j, f := range k.Fields {
				if f == "kubeConfig" {
					v.add(src.At(fmt.Sprintf("%s.fields.%d", path, j)), "remove it: remote clusters are the platform admins' to wire",
						"spec.kubeConfig is never allowed in a workspace: it applies with another identity or to another cluster")
				}
			}
		}
	}
}

// appRef checks one component or workspace entry's app reference.
func (v *validator) appRef(name string, src Source, path string, seen map[string]int, i int, list string) {
	if name == "" {
		v.add(src.At(path), "set app: to the name of a catalog app", "app is required")
		return
	}
	if j, dup := seen[name]; dup {
		v.add(src.At(path+".app"), "merge the two entries into one", "app %q is listed twice in %s (first at %s)", name, list, src.At(fmt.Sprintf("%s.%d", parentPath(path), j)))
	} else {
		seen[name] = i
	}
	if v.r.App(name) == nil {
		v.add(src.At(path+".app"), "add catalog/"+name+"/app.yaml or use one of: "+listOrNone(v.appNames()), "unknown app %q", name)
	}
}

func (v *validator) appNames() []string {
	var names []string
	for _, a := range v.r.Apps {
		names = append(names, a.Metadata.Name)
	}
	return names
}

// entryValues checks that an entry only sets values its app declares.
func (v *validator) entryValues(app string, values Values, src Source, path string) {
	a := v.r.App(app)
	if a == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if _, ok := a.Spec.Values[name]; !ok {
			declared := slices.Sorted(maps.Keys(a.Spec.Values))
			hint := "remove it"
			if s := closest(name, declared); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			if len(declared) > 0 {
				hint += "; or declare it in " + a.Source.File
			}
			v.add(src.At(path+"."+name), hint, "app %s declares no value %s; declared: %s", app, name, listOrNone(declared))
		}
	}
}

func (v *validator) selector(s *Selector, src Source, path string) {
	if s == nil {
		return
	}
	v.labels(s.MatchLabels, src, path+".matchLabels")
	found := false
	for i, r := range s.MatchExpressions {
		rp := fmt.Sprintf("%s.matchExpressions.%d", path, i)
		req := metav1.LabelSelectorRequirement{Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values}
		for _, e := range metav1validation.ValidateLabelSelectorRequirement(req, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("x")) {
			found = true
			sub := strings.TrimPrefix(fieldIndexRe.ReplaceAllString(e.Field, ".$1"), "x.")
			v.add(src.At(rp+"."+sub), "operators are In and NotIn (with values), Exists and DoesNotExist (without values)",
				"invalid cluster selector: %s: %s", sub, errDetail(e))
		}
	}
	if found {
		return
	}
	if _, err := s.Matches(nil); err != nil {
		v.add(src.At(path), "fix the selector (Kubernetes label selector syntax)", "%v", err)
	}
}

func errDetail(e *field.Error) string {
	if e.Type == field.ErrorTypeInvalid {
		return fmt.Sprintf("%q %s", fmt.Sprint(e.BadValue), e.Detail)
	}
	return e.Type.String() + ": " + e.Detail
}

// pattern checks a repo name pattern on its own; per-target names are
// checked by repoNames.
func (v *validator) pattern(p string, src Source, path string) {
	if !strings.Contains(p, "{name}") {
		v.add(src.At(path), `include {name}, e.g. "cluster-{name}"`, "repo name pattern %q does not contain {name}", p)
		return
	}
	if msg := repoNameProblem(expandRepo(p, "x")); msg != "" {
		v.add(src.At(path), "GitHub repo names use letters, digits, '.', '-' and '_'", "repo name pattern %q %s", p, msg)
	}
}

func (v *validator) countOrPercent(q *intstr.IntOrString, src Source, path string) {
	if q == nil {
		return
	}
	pos := src.At(path)
	if q.Type == intstr.Int {
		if q.IntVal < 0 {
			v.add(pos, "use a count (0 or more) or a percentage such as \"10%\"", "%s must not be negative", path)
		}
		return
	}
	m := percentRe.FindStringSubmatch(q.StrVal)
	if m == nil {
		v.add(pos, "use a count such as 3 or a percentage such as \"10%\"", "invalid %s %q", path, q.StrVal)
		return
	}
	if n, err := strconv.Atoi(m[1]); err != nil || n > 100 {
		v.add(pos, "use a percentage between 0% and 100%", "invalid %s %q", path, q.StrVal)
	}
}

func (v *validator) cluster(c *Cluster) {
	src := c.Source
	v.meta(c.TypeMeta, c.Metadata, src, KindCluster)
	v.namedByFile(c.Metadata.Name, src, "cluster")
	if ws := c.Spec.Workspace; ws != "" && v.r.Workspace(ws) == nil {
		var names []string
		for _, w := range v.r.Workspaces {
			names = append(names, w.Metadata.Name)
		}
		v.add(src.At("spec.workspace"), "add workspaces/"+ws+".yaml or use one of: "+listOrNone(names), "unknown workspace %q", ws)
	}
	v.teams(c.Spec.Admins, src, "spec.admins")
}

func (v *validator) workspace(w *Workspace) {
	src := w.Source
	v.meta(w.TypeMeta, w.Metadata, src, KindWorkspace)
	v.namedByFile(w.Metadata.Name, src, "workspace")
	v.namespace(w)
	switch w.Spec.PodSecurity {
	case "", PodSecurityRestricted, PodSecurityBaseline:
	case PodSecurityPrivileged:
		v.add(src.At("spec.podSecurity"), "use restricted (the default) or baseline; a workload that needs privileges is a platform component (platform.yaml spec.components)",
			"Pod Security level privileged is never allowed for a workspace: its admins could run privileged pods, host namespaces and hostPath volumes, which is root on the node")
	default:
		v.add(src.At("spec.podSecurity"), "use restricted (the default) or baseline", "invalid Pod Security level %q", w.Spec.PodSecurity)
	}
	v.teams(w.Spec.Admins, src, "spec.admins")
	seen := map[string]int{}
	for i, ref := range w.Spec.Apps {
		path := fmt.Sprintf("spec.apps.%d", i)
		v.appRef(ref.App, src, path, seen, i, "the workspace's apps")
		if a := v.r.App(ref.App); a != nil && a.Spec.Scope == ScopeCluster {
			v.add(src.At(path+".app"), "deploy it as a platform component in platform.yaml, or make it namespaced in "+a.Source.File,
				"cluster-scoped app %s can only be a platform component", ref.App)
		}
		v.entryValues(ref.App, ref.Values, src, path+".values")
	}
}

// namedByFile checks that an object's name is its file's: clusters/<name>.yaml holds cluster
// <name> (and workspaces/<name>.yaml workspace <name>), so whoever may edit a path may define
// only the cluster that path names (CODEOWNERS delegate paths, not names).
func (v *validator) namedByFile(name string, src Source, kind string) {
	if name == "" || src.File == "" {
		return
	}
	base := path.Base(src.File)
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	if base == name {
		return
	}
	want := path.Join(path.Dir(src.File), name+path.Ext(src.File))
	v.add(src.At("metadata.name"), fmt.Sprintf("rename the file to %s, or set metadata.name: %s", want, base),
		"%s %q is defined in %s (metadata.name at %s): a %s's name must be its file's name, %q", kind, name, src.File, src.At("metadata.name"), kind, base)
}

// namespace checks the workspace namespace: a DNS-1123 label that Kubernetes
// or Flux do not own.
func (v *validator) namespace(w *Workspace) {
	ns, path := w.Namespace(), "spec.namespace"
	if !w.Source.has(path) {
		path = "metadata.name"
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		if ns != w.Metadata.Name { // else meta reported the name already
			v.add(w.Source.At(path), dnsLabelHint, "invalid namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		return
	}
	if SystemNamespace(ns) {
		v.add(w.Source.At(path), "set spec.namespace to a namespace of the workspace's own", "namespace %q is reserved for Kubernetes or Flux", ns)
	}
}

// namespaceOwners refuses a namespace with two owners among the ones the control repo alone
// names: two workspaces, a workspace and fleetbot itself (its deployment's namespace, a
// management cluster's provisioning namespace, which holds every cluster's kubeconfig). The
// platform components' namespaces are known once their apps are built: fanout checks those
// (see fanout's namespace owners).
func (v *validator) namespaceOwners() {
	type owner struct {
		what string
		pos  Position
	}
	fleetbot := map[string]owner{FleetbotNamespace: {what: "fleetbot's own deployment (deploy/base/kustomization.yaml)"}}
	if p := v.r.Platform; p != nil {
		for i, m := range p.Spec.ManagementClusters {
			at := fmt.Sprintf("spec.managementClusters.%d", i)
			if p.Source.has(at + ".namespace") {
				at += ".namespace"
			}
			fleetbot[m.ProvisionNamespace()] = owner{what: "the provisioning namespace of management cluster " + m.Name + " (it holds every provisioned cluster's kubeconfig)", pos: p.Source.At(at)}
		}
	}
	seen := map[string]owner{}
	for _, w := range v.r.Workspaces {
		ns, at := w.Namespace(), "spec.namespace"
		if !w.Source.has(at) {
			at = "metadata.name"
		}
		if ns == "" || SystemNamespace(ns) {
			continue // namespace reported it
		}
		pos := w.Source.At(at)
		if f, ok := fleetbot[ns]; ok {
			where := ""
			if f.pos.File != "" {
				where = " (" + f.pos.String() + ")"
			}
			v.add(pos, "set spec.namespace to a namespace of the workspace's own",
				"workspace %s: namespace %q belongs to %s%s: a workspace is admin in its namespace and would read its Secrets", w.Metadata.Name, ns, f.what, where)
			continue
		}
		if first, dup := seen[ns]; dup {
			v.add(pos, "give each workspace a namespace of its own (spec.namespace)",
				"workspace %s: namespace %q is already the namespace of %s (%s): a namespace has one owner", w.Metadata.Name, ns, first.what, first.pos)
			continue
		}
		seen[ns] = owner{what: "workspace " + w.Metadata.Name, pos: pos}
	}
}

func (v *validator) app(a *App) {
	src := a.Source
	v.meta(a.TypeMeta, a.Metadata, src, KindApp)
	switch a.Spec.Scope {
	case ScopeCluster, ScopeNamespaced:
	case "":
		v.add(src.At("spec.scope"), "set scope: cluster (platform components only) or scope: namespaced", "spec.scope is required")
	default:
		v.add(src.At("spec.scope"), "use cluster or namespaced", "invalid scope %q", a.Spec.Scope)
	}
	for _, name := range slices.Sorted(maps.Keys(a.Spec.Values)) {
		pos := src.At("spec.values." + name)
		if !valueNameRe.MatchString(name) {
			v.add(pos, "value names are letters, digits and '_', not starting with a digit (they are used as ${name})", "invalid value name %q", name)
		}
		if spec := a.Spec.Values[name]; spec.Required && spec.Default != nil {
			v.add(pos, "drop required: true or drop the default", "value %s is required and has a default", name)
		}
	}
	v.substitutions(a)
}

// substitutions reports ${name} references in an app's YAML files that the
// app does not declare, so a typo never reaches a cluster. $${name} is an
// escaped literal; forms other than a plain ${name} are left to the renderer.
func (v *validator) substitutions(a *App) {
	declared := slices.Sorted(maps.Keys(a.Spec.Values))
	for _, file := range slices.Sorted(maps.Keys(a.Files)) {
		if !isYAML(file) && path.Base(file) != "Kustomization" {
			continue
		}
		for _, ref := range References(a.Files[file]) {
			if _, ok := a.Spec.Values[ref.Name]; ok {
				continue
			}
			hint := "declare it under spec.values in " + a.Source.File + ", or write $${" + ref.Name + "} for a literal ${" + ref.Name + "}"
			if s := closest(ref.Name, declared); s != "" {
				hint = fmt.Sprintf("did you mean ${%s}? Or %s", s, hint)
			}
			v.add(Position{File: a.Dir + "/" + file, Line: ref.Line}, hint,
				"${%s} is not declared by app %s; declared: %s", ref.Name, a.Metadata.Name, listOrNone(declared))
		}
	}
}

// Reference is one ${name} substitution in a manifest.
type Reference struct {
	Name string
	Line int // 1-based
}

// References lists the ${name} substitutions in the YAML data, in order,
// skipping escaped $${name} and anything that is not a plain value name. The
// line of each comes from the parsed node holding it (in a literal block
// scalar, the line of the text holding it): comments hold no references,
// since kustomize drops them before anything is substituted. Data that does
// not parse as YAML is lexed as text (kustomize reports its syntax).
func References(data []byte) []Reference {
	var refs []Reference
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return refs
		}
		if err != nil {
			return textReferences(data, 1)
		}
		nodeReferences(&doc, &refs)
	}
}

// nodeReferences appends the references in the scalars under n.
func nodeReferences(n *yaml.Node, refs *[]Reference) {
	if n.Kind == yaml.ScalarNode {
		line, text := n.Line, n.Value
		if n.Style&yaml.LiteralStyle != 0 {
			line++ // the text starts on the line after the | indicator
		}
		for _, r := range textReferences([]byte(text), line) {
			if n.Style&yaml.LiteralStyle == 0 {
				r.Line = n.Line // folded and flow scalars do not keep their line breaks
			}
			*refs = append(*refs, r)
		}
		return
	}
	for _, c := range n.Content {
		nodeReferences(c, refs)
	}
}

// textReferences lexes data, whose first line is line, for references.
func textReferences(data []byte, line int) []Reference {
	var refs []Reference
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\n':
			line++
		case data[i] == '$' && i+1 < len(data) && data[i+1] == '$':
			i++ // $$ escapes the next $
		case data[i] == '$' && i+1 < len(data) && data[i+1] == '{':
			end := bytes.IndexByte(data[i+2:], '}')
			if end < 0 {
				continue
			}
			name := string(data[i+2 : i+2+end])
			if valueNameRe.MatchString(name) {
				refs = append(refs, Reference{Name: name, Line: line})
				i += 2 + end
			}
		}
	}
	return refs
}

// duplicates reports a second object of a kind with the same name, naming
// the first.
func (v *validator) duplicates() {
	type obj struct {
		name string
		src  Source
	}
	check := func(kind string, objs []obj) {
		sort.SliceStable(objs, func(i, j int) bool { return less(objs[i].name, objs[i].src, objs[j].name, objs[j].src) })
		for i := 1; i < len(objs); i++ {
			if objs[i].name != "" && objs[i].name == objs[i-1].name {
				j := i - 1
				for j > 0 && objs[j-1].name == objs[i].name {
					j--
				}
				v.add(objs[i].src.At("metadata.name"), "rename one of them; names are unique per kind",
					"duplicate %s name %q (first defined at %s)", kind, objs[i].name, objs[j].src.At("metadata.name"))
			}
		}
	}
	var cs, ws, as []obj
	for _, c := range v.r.Clusters {
		cs = append(cs, obj{c.Metadata.Name, c.Source})
	}
	for _, w := range v.r.Workspaces {
		ws = append(ws, obj{w.Metadata.Name, w.Source})
	}
	for _, a := range v.r.Apps {
		as = append(as, obj{a.Metadata.Name, a.Source})
	}
	check("cluster", cs)
	check("workspace", ws)
	check("app", as)
}

// repoNames checks the target repo name of every cluster and workspace and
// that no two targets share one.
func (v *validator) repoNames() {
	p := v.r.Platform
	if p == nil {
		return
	}
	type owner struct {
		what string
		pos  Position
	}
	seen := map[string]owner{}
	check := func(kind, name, repo string, src Source, patternPath string) {
		if name == "" || !strings.Contains(patternOf(p, kind), "{name}") {
			return
		}
		pos := src.At("metadata.name")
		if msg := repoNameProblem(repo); msg != "" {
			v.add(pos, "shorten the name or change "+patternPath+" in "+p.Source.At(patternPath).String(),
				"%s %s maps to repo name %q, which %s", kind, name, repo, msg)
			return
		}
		key := strings.ToLower(repo)
		if first, dup := seen[key]; dup {
			if first.what != kind+" "+name {
				hint := "make spec.repos.cluster and spec.repos.workspace differ (e.g. cluster-{name} and workspace-{name}) in " + p.Source.File
				if strings.HasPrefix(first.what, "the control repo") {
					hint = "rename the " + kind + " or change spec.repos.control: fleetbot never writes into the control repo"
				}
				v.add(pos, hint,
					"%s %s and %s (%s) both map to repo %s/%s", kind, name, first.what, first.pos, p.Spec.Owner, repo)
			}
			return
		}
		seen[key] = owner{kind + " " + name, pos}
	}
	if ctl := p.Spec.Repos.Control; ctl != "" {
		seen[strings.ToLower(ctl)] = owner{"the control repo (spec.repos.control)", p.Source.At("spec.repos.control")}
	}
	for _, c := range v.r.Clusters {
		check("cluster", c.Metadata.Name, v.r.ClusterRepo(c.Metadata.Name), c.Source, "spec.repos.cluster")
	}
	for _, w := range v.r.Workspaces {
		check("workspace", w.Metadata.Name, v.r.WorkspaceRepo(w.Metadata.Name), w.Source, "spec.repos.workspace")
	}
}

func patternOf(p *Platform, kind string) string {
	if kind == "cluster" {
		return p.Spec.Repos.Cluster
	}
	return p.Spec.Repos.Workspace
}

// values checks, per cluster, that cluster values are declared by some app
// deployed there and that every required value is set.
func (v *validator) values() {
	dp := v.r.deployer()
	required := map[*App][]string{} // sorted names of each app's required values
	var deps []Deployment           // reused: nothing keeps a cluster's list
	for _, c := range v.r.Clusters {
		deps = dp.cluster(c, deps[:0], false)
		// Issues are sorted by position and message in the end: the values need no order.
		for name := range c.Spec.Values {
			if declares(deps, name) {
				continue
			}
			names := declaredValues(deps)
			hint := "remove it; no app deployed to this cluster declares values"
			if len(names) > 0 {
				hint = "the apps deployed to " + c.Metadata.Name + " declare: " + strings.Join(names, ", ")
				if s := closest(name, names); s != "" {
					hint = fmt.Sprintf("did you mean %q? %s", s, hint)
				}
			}
			if owners := v.declaredBy(name); len(owners) > 0 {
				hint = fmt.Sprintf("it is declared by %s (not deployed to %s); remove it or deploy the app",
					strings.Join(owners, ", "), c.Metadata.Name)
			}
			v.add(c.Source.At("spec.values."+name), hint, "no app deployed to cluster %s declares value %s", c.Metadata.Name, name)
		}
		for _, d := range deps {
			names, ok := required[d.App]
			if !ok {
				for _, name := range slices.Sorted(maps.Keys(d.App.Spec.Values)) {
					if d.App.Spec.Values[name].Required {
						names = append(names, name)
					}
				}
				required[d.App] = names
			}
			for _, name := range names {
				// Set as mergeValues sets it: a default, the entry or the cluster (d.Values
				// are the entry's own here).
				if d.App.Spec.Values[name].Default != nil {
					continue
				}
				if _, ok := d.Values[name]; ok {
					continue
				}
				if _, ok := c.Spec.Values[name]; ok {
					continue
				}
				pathAt := "spec.values"
				if !c.Source.has(pathAt) {
					pathAt = "metadata.name"
				}
				v.add(c.Source.At(pathAt),
					fmt.Sprintf("add to %s:\n      spec:\n        values:\n          %s: \"...\"\n    or set it in the entry at %s", c.Source.File, name, d.Source),
					"cluster %s: app %s requires value %s, which is not set", c.Metadata.Name, d.App.Metadata.Name, name)
			}
		}
	}
}

// declares reports whether an app of deps declares value name.
func declares(deps []Deployment, name string) bool {
	for _, d := range deps {
		if _, ok := d.App.Spec.Values[name]; ok {
			return true
		}
	}
	return false
}

// declaredValues is the sorted names of the values the apps of deps declare.
func declaredValues(deps []Deployment) []string {
	var names []string
	for _, d := range deps {
		for name := range d.App.Spec.Values {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// declaredBy lists the apps (as "app X") that declare the value name.
func (v *validator) declaredBy(name string) []string {
	var apps []string
	for _, a := range v.r.Apps {
		if _, ok := a.Spec.Values[name]; ok {
			apps = append(apps, "app "+a.Metadata.Name)
		}
	}
	return apps
}

// repoNameProblem says why name is not a valid GitHub repo name, or "".
func repoNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > 100:
		return "is longer than 100 characters"
	case name == "." || name == "..":
		return "is not allowed"
	case strings.HasSuffix(strings.ToLower(name), ".git"):
		return "ends in .git"
	case !repoNameRe.MatchString(name):
		return "contains characters other than letters, digits, '.', '-' and '_'"
	}
	return ""
}

// validLogin reports whether s is a GitHub user or organization login.
func validLogin(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// validRef reports whether s is a usable git branch name (git check-ref-format).
func validRef(s string) bool {
	if s == "" || s == "@" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".") ||
		strings.HasPrefix(s, "-") || strings.Contains(s, "..") || strings.Contains(s, "@{") || strings.Contains(s, "//") {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	for _, part := range strings.Split(s, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	return true
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// warnings lists what is valid but almost always a mistake: a platform component whose
// clusterSelector matches no cluster of the fleet. It is most likely a typo, and it removes
// the component from every cluster that had it.
func warnings(r *Repo) Issues {
	var is Issues
	if r.Platform == nil || len(r.Clusters) == 0 {
		return nil
	}
	is = append(is, rolloutWarnings(r)...)
	if r.Paused != nil && !r.HasRollout() {
		is.Add(Position{File: PausedFile}, "declare spec.rollout.waves (or a component's rollout.waves), or remove the file: fleetbot rollout resume",
			"the rollout is paused, but no waves are declared: the pause holds nothing back (every change reaches every cluster at once)")
	}
	src := r.Platform.Source
	for i, comp := range r.Platform.Spec.Components {
		if comp.ClusterSelector == nil {
			continue
		}
		matched := false
		for _, c := range r.Clusters {
			if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err == nil && ok {
				matched = true
				break
			}
		}
		if !matched {
			is.Add(src.At(fmt.Sprintf("spec.components.%d.clusterSelector", i)),
				"check the labels against clusters/*.yaml (a typo removes the component from every cluster that runs it); remove the component if no cluster should run it",
				"component %s: clusterSelector matches none of the %d clusters", comp.App, len(r.Clusters))
		}
	}
	is = append(is, provisionWarnings(r)...)
	is.Sort()
	return is
}

// MaxRequiredApprovals is the most approvals a branch rule may require (GitHub's limit for a
// ruleset's required_approving_review_count and a branch protection's).
const MaxRequiredApprovals = 10

// BypassRoles are the repository roles a branch rule may let bypass it, with GitHub's ids of
// them in a ruleset's bypass_actors (RepositoryRole).
var BypassRoles = map[string]int64{"maintain": 2, "write": 4, "admin": 5}

// branchRules checks spec.access.branchRules: approvals within GitHub's range, each required
// check named once, each bypass actor exactly one of team, app, role, organizationAdmin.
func (v *validator) branchRules(b *BranchRules, owner string, src Source) {
	if b == nil {
		return
	}
	const at = "spec.access.branchRules"
	if n := b.RequiredApprovals; n != nil && (*n < 0 || *n > MaxRequiredApprovals) {
		v.add(src.At(at+".requiredApprovals"), fmt.Sprintf("use 0 to %d (GitHub's limit)", MaxRequiredApprovals),
			"invalid requiredApprovals %d", *n)
	}
	seen := map[string]bool{}
	for i, c := range b.RequiredChecks {
		path := fmt.Sprintf("%s.requiredChecks.%d", at, i)
		switch {
		case strings.TrimSpace(c.Context) == "":
			v.add(src.At(path+".context"), "name the check run or commit status context", "required check without a context")
		case seen[c.Context]:
			v.add(src.At(path+".context"), "list each check once", "required check %q is listed twice", c.Context)
		}
		seen[c.Context] = true
		if c.AppID < 0 {
			v.add(src.At(path+".appId"), "use the GitHub App's id, or leave it out to accept the check from any source", "invalid appId %d", c.AppID)
		}
	}
	actors := map[string]bool{}
	for i, a := range b.Bypass {
		path := fmt.Sprintf("%s.bypass.%d", at, i)
		n := 0
		key := ""
		if a.Team != "" {
			n, key = n+1, "team/"+strings.ToLower(a.Team)
		}
		if a.App != 0 {
			n, key = n+1, fmt.Sprintf("app/%d", a.App)
			if a.App < 0 {
				v.add(src.At(path+".app"), "use the GitHub App's id", "invalid app id %d", a.App)
			}
		}
		if a.Role != "" {
			n, key = n+1, "role/"+a.Role
			if _, ok := BypassRoles[a.Role]; !ok {
				v.add(src.At(path+".role"), "use admin, maintain or write", "invalid bypass role %q", a.Role)
			}
		}
		if a.OrganizationAdmin {
			n, key = n+1, "organizationAdmin"
		}
		switch {
		case n != 1:
			v.add(src.At(path), "give exactly one of team, app, role or organizationAdmin: true", "bypass actor %d names %d actors", i, n)
		case actors[key]:
			v.add(src.At(path), "list each bypass actor once", "bypass actor %s is listed twice", key)
		}
		actors[key] = true
	}
}
