package fanout

import (
	"fmt"
	"path"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// RepoProblem is one problem found by CheckRepo: the file it is about (the
// manifest that defines an object, or the kustomization that failed), the
// object when there is one, and what is wrong.
type RepoProblem struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	// Object is "Kind/name", when the problem is about a rendered object.
	Object  string `json:"object,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// String renders "file[:line]: kind/name: message".
func (p RepoProblem) String() string {
	s := p.File
	if p.Line > 0 {
		s += fmt.Sprintf(":%d", p.Line)
	}
	if p.Object != "" {
		s += ": " + p.Object
	}
	return s + ": " + p.Message
}

// RepoCheck says what CheckRepo renders and enforces.
type RepoCheck struct {
	// Entries are the kustomization directories to render, relative to the
	// repo root (e.g. clusters/prod-eu-1).
	Entries []string
	// Namespace confines every rendered object to one namespace, as Flux's
	// targetNamespace and impersonation do on the cluster: cluster-scoped
	// objects and objects of another namespace are problems. "" renders
	// without confinement (cluster repos: only build errors and remote or
	// escaping references are problems).
	Namespace string
	// ServiceAccount is the one a confined repo's Flux Kustomizations and
	// HelmReleases must impersonate (the workspace's, named after it). It
	// is used only with a Namespace.
	ServiceAccount string
	// PodSecurity is the Pod Security level of the namespace (the workspace's spec.podSecurity;
	// "": restricted). Every pod a confined repo asks for is evaluated against it.
	PodSecurity string
	// Allow extends DefaultTenantKinds, the kinds a confined repo may hold (platform.yaml
	// spec.tenants.allow).
	Allow []control.TenantKind
}

// tenantRules are what a confined check holds each object to, built once per CheckRepo.
type tenantRules struct {
	kinds tenantKinds
	admin []rbacv1.PolicyRule
	pods  psapolicy.Evaluator
	level string
}

func newTenantRules(c RepoCheck) (*tenantRules, error) {
	admin, err := AdminRules()
	if err != nil {
		return nil, err
	}
	ev, err := newPodSecurityEvaluator()
	if err != nil {
		return nil, fmt.Errorf("loading the Pod Security policy: %w", err)
	}
	level := c.PodSecurity
	if level == "" {
		level = control.PodSecurityRestricted
	}
	return &tenantRules{kinds: newTenantKinds(c.Allow), admin: admin, pods: ev, level: level}, nil
}

// CheckRepo renders the kustomizations of a workspace or cluster repo
// offline, the way Flux will on the cluster, and reports what Flux would
// refuse or what escapes the repo's persona: remote bases and references
// leaving the repo (found before kustomize runs, so nothing is fetched),
// build errors, and with a Namespace, cluster-scoped objects, objects in
// another namespace and Flux objects that would leave the namespace (see
// tenantFlux). Problems about an object point at the file and line of the
// parsed document defining it. files are the repo's files by slash-separated path; the
// build runs on an in-memory filesystem holding only them.
func CheckRepo(files map[string][]byte, c RepoCheck) []RepoProblem {
	var out []RepoProblem
	staged, problems := closeTree(files, c.Entries, false)
	for _, p := range problems {
		out = append(out, RepoProblem{File: p.File, Line: p.Line, Message: repoWords(p.Message), Hint: repoWords(p.Hint)})
	}
	if len(out) > 0 {
		return sortProblems(out)
	}
	ko := krusty.MakeDefaultOptions()
	ko.PluginConfig = types.DisabledPluginConfig()
	ko.LoadRestrictions = types.LoadRestrictionsRootOnly
	ko.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(ko)
	ix := indexDocs(files)
	var rules *tenantRules
	if c.Namespace != "" {
		var err error
		if rules, err = newTenantRules(c); err != nil {
			return []RepoProblem{{File: ".", Message: err.Error()}}
		}
	}
	for _, entry := range c.Entries {
		out = append(out, checkEntry(k, ix, files, staged, entry, c, rules)...)
	}
	return sortProblems(out)
}

// checkEntry builds one kustomization directory and checks its objects.
func checkEntry(k *krusty.Kustomizer, ix docIndex, files, staged map[string][]byte, entry string, c RepoCheck, rules *tenantRules) (out []RepoProblem) {
	ns := c.Namespace
	kfile := entry + "/kustomization.yaml"
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, ok := files[path.Join(entry, name)]; ok {
			kfile = path.Join(entry, name)
		}
	}
	defer func() {
		// kustomize has panicked on malformed input before.
		if v := recover(); v != nil {
			out = append(out, RepoProblem{File: kfile, Message: fmt.Sprintf("kustomize build failed: %v", v)})
		}
	}()
	const root = "/repo"
	fs := filesys.MakeFsInMemory()
	for p, data := range staged {
		if p == kfile {
			// Only this build sees the annotation: nothing it renders is written.
			data = withOrigins(data)
		}
		if err := fs.WriteFile(path.Join(root, p), data); err != nil {
			return []RepoProblem{{File: p, Message: fmt.Sprintf("cannot stage file for kustomize: %v", err)}}
		}
	}
	m, err := k.Run(fs, path.Join(root, entry))
	if err != nil {
		return []RepoProblem{{File: kfile, Message: "kustomize build failed: " + strings.ReplaceAll(err.Error(), root+"/", ""),
			Hint: "run `kustomize build " + entry + "` to reproduce"}}
	}
	if ns == "" {
		return nil
	}
	roles := map[string]bool{}
	for _, res := range m.Resources() {
		if res.GetKind() == "Role" && strings.HasPrefix(res.GetApiVersion(), "rbac.authorization.k8s.io/") {
			roles[res.GetName()] = true
		}
	}
	for _, res := range m.Resources() {
		apiVersion, kind, name, objNS := res.GetApiVersion(), res.GetKind(), res.GetName(), res.GetNamespace()
		from := originFile(res, entry)
		file, line := ix.locate(from, kind, name, objNS, nil, kfile)
		obj := kind + "/" + name
		switch {
		case clusterScoped(apiVersion, kind):
			out = append(out, RepoProblem{File: file, Line: line, Object: obj,
				Message: fmt.Sprintf("is cluster-scoped: rendered by %s, it would be refused on the cluster (the workspace may only create objects in namespace %s)", kfile, ns),
				Hint:    "ask the platform admins to add it as a platform component, or remove it"})
			continue
		case objNS != "" && objNS != ns:
			out = append(out, RepoProblem{File: file, Line: line, Object: obj,
				Message: fmt.Sprintf("is in namespace %q: rendered by %s, the workspace may only create objects in namespace %s", objNS, kfile, ns),
				Hint:    "remove metadata.namespace (Flux sets the workspace namespace) or set it to " + ns})
		}
		m, err := res.Map()
		if err != nil {
			continue
		}
		findings, listed := rules.kinds.allowlistFindings(m, ns)
		if listed {
			findings = append(findings, tenantFlux(m, ns, c.ServiceAccount)...)
			findings = append(findings, rbacFindings(m, rules.admin, roles)...)
			findings = append(findings, podSecurityFindings(rules.pods, m, rules.level)...)
		}
		for _, f := range findings {
			file, line := ix.locate(from, kind, name, objNS, f.Path, kfile)
			if KindWorkspace.Managed(file) {
				// Rendered by fleetbot from the catalog: the workspace admins cannot change it.
				f.Hint = "fleetbot renders " + file + " from the control repo's catalog: ask the platform admins to fix the app there; " + f.Hint
			}
			out = append(out, RepoProblem{File: file, Line: line, Object: obj,
				Message: f.Message + " (rendered by " + kfile + ")", Hint: f.Hint})
		}
	}
	return out
}

// withOrigins returns the kustomization data with originAnnotations added to
// its buildMetadata, so kustomize annotates every object it loads with the
// file it came from (config.kubernetes.io/origin) and a problem points at
// that file, whatever other file defines an object of the same kind and
// name. data that does not parse is returned as is: kustomize reports it.
func withOrigins(data []byte) []byte {
	doc, err := kyaml.Parse(string(data))
	if err != nil || doc.YNode().Kind != kyaml.MappingNode {
		return data
	}
	bm, err := doc.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "buildMetadata"))
	if err != nil || bm == nil || bm.YNode().Kind != kyaml.SequenceNode {
		return data
	}
	for _, e := range bm.Content() {
		if e.Value == types.OriginAnnotations {
			return data
		}
	}
	bm.YNode().Content = append(bm.YNode().Content, kyaml.NewStringRNode(types.OriginAnnotations).YNode())
	out, err := doc.String()
	if err != nil {
		return data
	}
	return []byte(out)
}

// originFile returns the repo path of the file kustomize loaded res from,
// from its origin annotation (a path relative to the entry kustomization),
// or "" when it has none (a generated object) or it names a remote base.
func originFile(res *resource.Resource, entry string) string {
	o, err := res.GetOrigin()
	if err != nil || o == nil || o.Repo != "" || o.Path == "" || o.ConfiguredIn != "" {
		return ""
	}
	return path.Join(entry, o.Path)
}

// repoWords rewords precheck's catalog-app messages for a target repo.
func repoWords(s string) string {
	s = strings.ReplaceAll(s, "the files of the control repo", "the files of this repo")
	s = strings.ReplaceAll(s, "the app directory", "the repo")
	return s
}

func sortProblems(ps []RepoProblem) []RepoProblem {
	sort.SliceStable(ps, func(a, b int) bool {
		if ps[a].File != ps[b].File {
			return ps[a].File < ps[b].File
		}
		if ps[a].Line != ps[b].Line {
			return ps[a].Line < ps[b].Line
		}
		return ps[a].Object < ps[b].Object
	})
	return ps
}
