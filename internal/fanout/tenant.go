package fanout

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// tenantFinding is one reason a Flux object in a workspace repo would let
// the workspace leave its namespace. Path is the field at fault, as keys and
// sequence indexes from the object's root.
type tenantFinding struct {
	Path    []string
	Message string
	Hint    string
}

// fluxGroup reports whether apiVersion belongs to a Flux API group.
func fluxGroup(apiVersion string) (group string, ok bool) {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found || !strings.HasSuffix(group, ".toolkit.fluxcd.io") {
		return "", false
	}
	return group, true
}

// impersonates reports whether kind is a Flux object that applies manifests
// to the cluster: the two that run as the controller's own cluster-admin
// ServiceAccount unless told to impersonate another.
func impersonates(group, kind string) bool {
	return group == "kustomize.toolkit.fluxcd.io" && kind == "Kustomization" ||
		group == "helm.toolkit.fluxcd.io" && kind == "HelmRelease"
}

// tenantFlux checks one rendered object of a workspace repo, confined to
// namespace ns, whose Flux objects must impersonate ServiceAccount sa.
//
// A Kustomization or HelmRelease must name sa in spec.serviceAccountName:
// without it, on a cluster without Flux's --default-service-account
// lockdown, the controller applies it with its own cluster-admin rights.
// No Flux object may carry spec.kubeConfig (it would apply to whatever
// cluster and identity the kubeconfig names), reference anything in another
// namespace (sourceRef, chartRef, chart.spec.sourceRef, dependsOn,
// targetNamespace, storageNamespace, an Alert's eventSources, a Receiver's
// resources, an image policy's repository: any namespace field under spec),
// or authenticate with a cloud provider (spec.provider other than generic:
// source-controller and image-reflector-controller would use their own cloud
// identity, which reaches the platform's registries and buckets). Secret
// references of Flux sources are local by type, so they need no check.
func tenantFlux(obj map[string]any, ns, sa string) []tenantFinding {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, ok := fluxGroup(apiVersion)
	if !ok {
		return nil
	}
	spec, _ := obj["spec"].(map[string]any)
	var out []tenantFinding
	if impersonates(group, kind) {
		got, _ := spec["serviceAccountName"].(string)
		switch {
		case got == "":
			out = append(out, tenantFinding{Path: []string{"spec", "serviceAccountName"},
				Message: fmt.Sprintf("has no spec.serviceAccountName: on a cluster without Flux's multi-tenancy lockdown it would run with the controller's cluster-admin rights, outside namespace %s", ns),
				Hint:    fmt.Sprintf("set spec.serviceAccountName: %s (the workspace's ServiceAccount)", sa)})
		case got != sa:
			out = append(out, tenantFinding{Path: []string{"spec", "serviceAccountName"},
				Message: fmt.Sprintf("impersonates ServiceAccount %q: the workspace's Flux objects may only run as %s", got, sa),
				Hint:    fmt.Sprintf("set spec.serviceAccountName: %s", sa)})
		}
	}
	if _, has := spec["kubeConfig"]; has {
		out = append(out, tenantFinding{Path: []string{"spec", "kubeConfig"},
			Message: "has spec.kubeConfig: it would apply with the identity and to the cluster the kubeconfig names, outside the workspace's confinement",
			Hint:    "remove spec.kubeConfig; remote clusters are the platform admins' to wire"})
	}
	if p, _ := spec["provider"].(string); p != "" && p != "generic" {
		out = append(out, tenantFinding{Path: []string{"spec", "provider"},
			Message: fmt.Sprintf("uses provider %q: Flux would authenticate with its controller's own cloud identity, which reaches the platform's registries and buckets", p),
			Hint:    "use provider: generic with a secretRef to a Secret in namespace " + ns})
	}
	for _, f := range []string{"targetNamespace", "storageNamespace"} {
		if v, _ := spec[f].(string); v != "" && v != ns {
			out = append(out, tenantFinding{Path: []string{"spec", f},
				Message: fmt.Sprintf("sets spec.%s to %q: the workspace may only create objects in namespace %s", f, v, ns),
				Hint:    fmt.Sprintf("remove spec.%s or set it to %s", f, ns)})
		}
	}
	crossNamespace(spec, []string{"spec"}, ns, &out)
	return out
}

// crossNamespace reports every "namespace" field under v naming another
// namespace than ns: in Flux's API these are references (sourceRef,
// chartRef, dependsOn, eventSources, resources, healthChecks, ...). Patch
// targets and common metadata are not references and are skipped.
func crossNamespace(v any, at []string, ns string, out *[]tenantFinding) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]string(nil), at...), k)
			switch k {
			case "patches", "postRenderers", "commonMetadata":
				continue
			case "namespace":
				if s, _ := x[k].(string); s != "" && s != ns {
					ref := strings.Join(at, ".")
					*out = append(*out, tenantFinding{Path: p,
						Message: fmt.Sprintf("%s names namespace %q: a workspace's Flux objects may only reference objects in namespace %s", ref, s, ns),
						Hint:    "remove the namespace (it defaults to the object's own) or set it to " + ns})
				}
				continue
			}
			crossNamespace(x[k], p, ns, out)
		}
	case []any:
		for i, e := range x {
			crossNamespace(e, append(append([]string(nil), at...), strconv.Itoa(i)), ns, out)
		}
	}
}

// docIndex holds the parsed YAML documents of a repo's (or an app's) files,
// so a problem about an object points at the file and line of the node a
// person edits rather than at kustomize's output. Lines always come from the
// parsed nodes, never from searching the text: a search for "kind: Service"
// also matches a ServiceAccount.
type docIndex []indexedDoc

type indexedDoc struct {
	file                  string
	kind, name, namespace string
	root                  *kyaml.Node // the document's mapping
}

// indexDocs parses every YAML file of files (every document of each), in
// path order. Kustomizations are skipped (they define no objects), and so are
// files or documents that do not parse: kustomize reports them.
func indexDocs(files map[string][]byte) docIndex {
	paths := make([]string, 0, len(files))
	for p := range files {
		if (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) && !isKustomization(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var ix docIndex
	for _, p := range paths {
		dec := kyaml.NewDecoder(strings.NewReader(string(files[p])))
		for {
			var doc kyaml.Node
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if len(doc.Content) == 0 || doc.Content[0].Kind != kyaml.MappingNode {
				continue
			}
			d := indexedDoc{file: p, root: doc.Content[0]}
			if k := field(d.root, "kind"); k != nil {
				d.kind = k.Value
			}
			meta := field(d.root, "metadata")
			if n := field(meta, "name"); n != nil {
				d.name = n.Value
			}
			if n := field(meta, "namespace"); n != nil {
				d.namespace = n.Value
			}
			ix = append(ix, d)
		}
	}
	return ix
}

// find returns the document defining the rendered object kind/name in
// namespace ns. With file set (kustomize's origin annotation names it), only
// that file's documents are candidates and one of the right kind is taken
// even when the name differs (a namePrefix or nameSuffix renamed it); without
// it, the name must match. Among candidates, a matching name wins over a
// renamed one, then a matching namespace, then the first in path order.
func (ix docIndex) find(file, kind, name, ns string) (indexedDoc, bool) {
	best, bestScore := indexedDoc{}, -1
	for _, d := range ix {
		if d.kind != kind || file != "" && d.file != file {
			continue
		}
		score := 0
		if d.name == name {
			score += 2
		} else if file == "" {
			continue
		}
		if d.namespace == ns {
			score++
		}
		if score > bestScore {
			best, bestScore = d, score
		}
	}
	return best, bestScore >= 0
}

// locate returns the file and line of field at (keys and sequence indexes)
// in the document defining kind/name (see find): the line of the field, or
// of its deepest ancestor present (a missing field), or of the kind key when
// at is empty. When no document defines the object (a generated object, or
// a name changed by a prefix outside a known file) it returns file if set,
// else fallback, with line 0.
func (ix docIndex) locate(file, kind, name, ns string, at []string, fallback string) (string, int) {
	d, ok := ix.find(file, kind, name, ns)
	if !ok {
		if file != "" {
			return file, 0
		}
		return fallback, 0
	}
	line := 0
	if k := keyNode(d.root, "kind"); k != nil {
		line = k.Line
	}
	n := d.root
	for _, step := range at {
		switch n.Kind {
		case kyaml.MappingNode:
			k := keyNode(n, step)
			if k == nil {
				return d.file, line
			}
			line, n = k.Line, field(n, step)
		case kyaml.SequenceNode:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(n.Content) {
				return d.file, line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return d.file, line
		}
	}
	return d.file, line
}

// keyNode returns the key node name of mapping n, or nil.
func keyNode(n *kyaml.Node, name string) *kyaml.Node {
	if n == nil || n.Kind != kyaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i]
		}
	}
	return nil
}
