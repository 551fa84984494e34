// Package manifest reads Kubernetes objects out of rendered YAML so plans and
// pull request bodies can say which objects a change adds, changes or
// removes, per kind, instead of only which files.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/yamlsize"
	yaml "go.yaml.in/yaml/v3"
)

// Object identifies one Kubernetes object in a file.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// digest is a hash of the object's canonical content, to tell a changed
	// object from an unchanged one.
	digest [32]byte
}

// ID is "Kind/namespace/name" (or "Kind/name" for cluster-scoped objects).
func (o Object) ID() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// key identifies an object across versions of a tree.
func (o Object) key() string { return o.APIVersion + "|" + o.ID() }

// Parse returns the objects of a multi-document YAML file, in file order.
// Empty documents are skipped; a document without kind is not an object.
func Parse(content []byte) ([]Object, error) {
	// Target repo files are human-editable: an alias bomb must not expand here.
	if err := yamlsize.Check(content, yamlsize.DefaultMaxNodes); err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var objs []Object
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return objs, fmt.Errorf("parsing YAML: %w", err)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		if kind == "" {
			continue
		}
		o := Object{Kind: kind}
		o.APIVersion, _ = doc["apiVersion"].(string)
		if md, ok := doc["metadata"].(map[string]any); ok {
			o.Name, _ = md["name"].(string)
			o.Namespace, _ = md["namespace"].(string)
		}
		canon, err := json.Marshal(doc)
		if err != nil {
			return objs, fmt.Errorf("hashing %s: %w", o.ID(), err)
		}
		o.digest = sha256.Sum256(canon)
		objs = append(objs, o)
	}
}

// Changes are the objects a change adds, changes and removes.
type Changes struct {
	Added   []Object `json:"added,omitempty"`
	Changed []Object `json:"changed,omitempty"`
	Removed []Object `json:"removed,omitempty"`
}

// Empty reports whether no object changes.
func (c Changes) Empty() bool {
	return len(c.Added)+len(c.Changed)+len(c.Removed) == 0
}

// Diff compares the objects of two versions of a set of files (path →
// content). Files that do not parse as YAML contribute no objects: a plan
// still lists them as changed files.
func Diff(before, after map[string][]byte) Changes {
	old := index(before)
	cur := index(after)
	var c Changes
	for k, o := range cur {
		p, ok := old[k]
		switch {
		case !ok:
			c.Added = append(c.Added, o)
		case p.digest != o.digest:
			c.Changed = append(c.Changed, o)
		}
	}
	for k, o := range old {
		if _, ok := cur[k]; !ok {
			c.Removed = append(c.Removed, o)
		}
	}
	sortObjects(c.Added)
	sortObjects(c.Changed)
	sortObjects(c.Removed)
	return c
}

func index(files map[string][]byte) map[string]Object {
	out := make(map[string]Object)
	for _, content := range files {
		objs, _ := Parse(content)
		for _, o := range objs {
			out[o.key()] = o
		}
	}
	return out
}

func sortObjects(objs []Object) {
	sort.Slice(objs, func(i, j int) bool { return objs[i].key() < objs[j].key() })
}

// CountByKind counts objects per kind, for one-line summaries.
func CountByKind(objs []Object) map[string]int {
	out := make(map[string]int)
	for _, o := range objs {
		out[o.Kind]++
	}
	return out
}

// FormatCounts renders counts as "Deployment×2, Service×1", sorted by kind.
func FormatCounts(counts map[string]int) string {
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// IsManifestPath reports whether a file path holds YAML objects.
func IsManifestPath(p string) bool {
	return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
}

// OnCluster drops kustomize's own build config (kustomization.yaml files):
// it is not an object that reaches a cluster, so plans do not count it.
// It returns nil when nothing is left.
func OnCluster(objs []Object) []Object {
	var out []Object
	for _, o := range objs {
		if !strings.HasPrefix(o.APIVersion, "kustomize.config.k8s.io/") {
			out = append(out, o)
		}
	}
	return out
}

// builtinGroups are the API groups a Kubernetes API server serves by itself
// (no CRD needed); "" is the core group.
var builtinGroups = map[string]bool{
	"": true, "admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"apps": true, "authentication.k8s.io": true, "authorization.k8s.io": true, "autoscaling": true, "batch": true,
	"certificates.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "internal.apiserver.k8s.io": true, "networking.k8s.io": true,
	"node.k8s.io": true, "policy": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true,
	"scheduling.k8s.io": true, "storage.k8s.io": true, "storagemigration.k8s.io": true,
}

// group is the API group of an apiVersion ("" for the core group's "v1").
func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// NeedsFromCluster lists, as "Kind.group" (IPAddressPool.metallb.io), the
// kinds among objs whose API group Kubernetes does not serve by itself and
// for which no CustomResourceDefinition among objs or provided (the objects
// of what is applied before objs, e.g. a component's dependencies) defines
// that group: the cluster must already have their CRDs, or Flux cannot apply
// objs (a Kustomization applying them fails as a whole). Sorted, without
// duplicates; nil when there are none.
func NeedsFromCluster(objs, provided []Object) []string {
	defined := map[string]bool{}
	for _, o := range append(slices.Clip(objs), provided...) {
		if o.Kind == "CustomResourceDefinition" && group(o.APIVersion) == "apiextensions.k8s.io" {
			if _, g, ok := strings.Cut(o.Name, "."); ok {
				defined[g] = true // metadata.name is <plural>.<group>
			}
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range OnCluster(objs) {
		g := group(o.APIVersion)
		if builtinGroups[g] || defined[g] {
			continue
		}
		k := o.Kind + "." + g
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
