package fanout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/hasher"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// appRoot is where an app's files live on the in-memory filesystem of a build.
const appRoot = "/app"

// build is the cached result of rendering one distinct kustomize input.
type build struct {
	// mu guards what renders of targets fill in on first use (variants, nsTemplate, files):
	// targets are rendered on several goroutines.
	mu sync.Mutex
	// layoutMu, the renderer's, serialises layouts of all builds: they ask kyaml's built-in
	// schema, which is not safe for concurrent use, whether a kind is cluster-scoped.
	layoutMu *sync.Mutex
	// objects in kustomize's legacy order (deterministic for any input).
	objects []object
	// problems found by precheck or kustomize; positions relative to the app dir.
	problems []problem
	// refs are the variable names the rendered output references; bad the
	// malformed references.
	refs, bad []string
	// variants by namespace ("" = as rendered), built on first use.
	variants map[string]*variant
	// nsTemplate is the build laid out once for the placeholder namespace nsPlaceholder, from
	// which the variant of any plain namespace is made by replacing the placeholder in the text
	// (see relayout); nil when that is not possible. nsTemplateDone says it was tried.
	nsTemplate     *variant
	nsTemplateDone bool
	// exact turns relayout off, so every namespace is laid out from the objects (tests compare
	// both ways).
	exact bool
	// used is the Render generation that last used the build, for eviction.
	used int
	// files memoises rendered app files across renders by app directory, namespace and the
	// values of the references: a warm render gives unchanged deployments the very bytes of
	// the previous render, which it neither substitutes again nor compares byte by byte.
	files map[string]*fileMemo
}

// fileMemo is one rendered app file and the Render generation that last used it.
type fileMemo struct {
	data []byte
	used int
}

// object is one rendered Kubernetes object.
type object struct {
	apiVersion, kind, name, namespace string
	node                              *kyaml.RNode
}

func (o object) id() string { return o.kind + "/" + o.name }

// variant is a build laid out for one namespace: its documents as templates
// ready for per-cluster substitution, or why it cannot be.
type variant struct {
	docs     []doc
	conflict []conflict
	// refs and bad are the variable names referenced and the malformed
	// references, sorted and unique.
	refs, bad []string
	// size is the length of the unsubstituted text, to size buffers.
	size int
	// hashed are the generated ConfigMaps and Secrets whose name carries kustomize's content
	// hash and whose content references a value: their hash is recomputed per cluster.
	hashed []hashedDoc
	// nsFrom and nsTo are set on a variant made by relayout: its docs' shapes are those of the
	// placeholder layout, where the namespace scalar holds nsFrom instead of nsTo.
	nsFrom, nsTo string
}

// hashedDoc is a generated object of a variant named base-<hash of its template>.
type hashedDoc struct {
	doc        int
	base, name string
}

// doc is one rendered object as a substitution template.
type doc struct {
	tmpl       template
	kind, name string
	// shape is the object's YAML tree before substitution (templates with variables only):
	// a substituted document must have exactly this structure, only the scalars holding a
	// ${name} may differ.
	shape *kyaml.Node
	// inert is set when substituting values made only of inertValue bytes cannot change the
	// document's structure (see inertShape), so such a substitution needs no parse check.
	inert bool
}

// conflict is an object a namespaced app may not render into a workspace.
type conflict struct {
	obj    object
	reason string
}

// inputHash keys the build cache: the app's files, path and content, in
// path order. The app's name and app.yaml are not part of it, so a rename or
// a values change never costs a kustomize build.
func inputHash(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(p), p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// kustomize runs one build of an app's files through krusty on an in-memory
// filesystem holding only those files, with built-in plugins only and loads
// restricted to the app directory. Callers serialise calls: krusty and
// kyaml's schema are not safe for concurrent use.
func kustomize(k *krusty.Kustomizer, files map[string][]byte) (b *build) {
	b = &build{variants: map[string]*variant{}, files: map[string]*fileMemo{}}
	staged, problems := closeTree(files, []string{"."}, true)
	if b.problems = problems; len(b.problems) > 0 {
		return b
	}
	defer func() {
		// kustomize has panicked on malformed input before; one app must not
		// take the whole render down.
		if v := recover(); v != nil {
			b.objects = nil
			b.problems = []problem{{File: "kustomization.yaml", Message: fmt.Sprintf("kustomize build failed: %v", v)}}
		}
	}()
	fs := filesys.MakeFsInMemory()
	for p, data := range staged {
		if err := fs.WriteFile(path.Join(appRoot, p), data); err != nil {
			b.problems = append(b.problems, problem{File: p, Message: fmt.Sprintf("cannot stage file for kustomize: %v", err)})
			return b
		}
	}
	m, err := k.Run(fs, appRoot)
	if err != nil {
		b.problems = append(b.problems, problem{
			File:    "kustomization.yaml",
			Message: "kustomize build failed: " + strings.ReplaceAll(err.Error(), appRoot+"/", ""),
			Hint:    "run `kustomize build` in the app directory to reproduce",
		})
		return b
	}
	for _, res := range m.Resources() {
		n := res.RNode.Copy()
		b.objects = append(b.objects, object{
			apiVersion: n.GetApiVersion(), kind: n.GetKind(), name: n.GetName(), namespace: n.GetNamespace(),
			node: n,
		})
	}
	v, err := b.variant("", "", nil)
	if err != nil {
		b.problems = append(b.problems, problem{File: "kustomization.yaml", Message: err.Error()})
		return b
	}
	b.refs, b.bad = v.refs, v.bad
	return b
}

// variant returns the build laid out for namespace ns, computing it once. plain memoises
// plainNamespace for the render (nil: not memoised). A platform component's layout (ns "")
// labels its Namespace objects with the Pod Security level psa (see labelNamespace).
func (b *build) variant(ns, psa string, plain map[string]bool) (*variant, error) {
	key := ns
	if ns == "" && psa != "" {
		key = "\x00" + psa
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.variants[key]; ok {
		return v, nil
	}
	v := b.relayout(ns, plain)
	if v == nil {
		var err error
		if v, err = b.layout(ns, psa); err != nil {
			return nil, err
		}
	}
	b.variants[key] = v
	return v, nil
}

// nsPlaceholder is the namespace of the layout that relayout copies: a DNS label no
// workspace is expected to use (one that does is laid out the exact way).
const nsPlaceholder = "fleetbot-ns-placeholder-5e2a9c0b"

// relayout makes the variant for namespace ns from the build's layout for nsPlaceholder by
// replacing the placeholder in the text: serialising every object once per workspace
// namespace was a tenth of a large fleet's render. The result is what layout(ns) returns, byte
// for byte, because the cases where it could differ are left to layout (nil is returned):
// a namespace the YAML encoder would not write as the same plain scalar as the placeholder
// (quoted, "123", "yes", ...), an object already in ns (not a conflict, unlike in the
// placeholder layout), a placeholder layout that failed or whose text holds the placeholder
// other than once per document. Docs' shapes stay the placeholder's (nsFrom/nsTo map it).
func (b *build) relayout(ns string, plain map[string]bool) *variant {
	if b.exact || ns == "" || ns == nsPlaceholder {
		return nil
	}
	isPlain, ok := plain[ns]
	if !ok {
		isPlain = b.plainNamespace(ns)
		if plain != nil {
			plain[ns] = isPlain
		}
	}
	if !isPlain {
		return nil
	}
	for _, o := range b.objects {
		if o.namespace == ns {
			return nil
		}
	}
	if !b.nsTemplateDone {
		b.nsTemplateDone = true
		if t, err := b.layout(nsPlaceholder, ""); err == nil && placeholderOnce(t) {
			b.nsTemplate = t
		}
	}
	t := b.nsTemplate
	if t == nil {
		return nil
	}
	v := &variant{conflict: t.conflict, refs: t.refs, bad: t.bad, hashed: t.hashed, nsFrom: nsPlaceholder, nsTo: ns,
		size: t.size + len(t.docs)*(len(ns)-len(nsPlaceholder)), docs: make([]doc, len(t.docs))}
	for i, d := range t.docs {
		segs := make([]segment, len(d.tmpl.segs))
		copy(segs, d.tmpl.segs)
		for j := range segs {
			if segs[j].name == "" && strings.Contains(segs[j].lit, nsPlaceholder) {
				segs[j].lit = strings.Replace(segs[j].lit, nsPlaceholder, ns, 1)
				break
			}
		}
		d.tmpl.segs = segs
		v.docs[i] = d
	}
	return v
}

// placeholderOnce reports whether each document of t holds nsPlaceholder exactly once (its
// metadata.namespace), in its literal text.
func placeholderOnce(t *variant) bool {
	for _, d := range t.docs {
		n := 0
		for _, s := range d.tmpl.segs {
			n += strings.Count(s.lit, nsPlaceholder)
		}
		if n != 1 {
			return false
		}
	}
	return true
}

// plainNamespace reports whether ns is written by the YAML encoder as a plain scalar equal to
// itself in metadata.namespace, as nsPlaceholder is: then the two layouts differ only there.
func plainNamespace(ns string) bool {
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	n := kyaml.NewRNode(&kyaml.Node{Kind: kyaml.MappingNode})
	if err := n.SetNamespace(ns); err != nil {
		return false
	}
	text, err := n.String()
	return err == nil && text == "metadata:\n  namespace: "+ns+"\n"
}

// layout serialises the objects, setting metadata.namespace to ns when ns is
// set. A namespaced app is confined to its workspace namespace, so a
// cluster-scoped object or one in another namespace is a conflict rather
// than silently moved. Without ns (a platform component), every Namespace object gets the Pod
// Security labels of level psa (labelNamespace).
func (b *build) layout(ns, psa string) (*variant, error) {
	b.lockLayout()
	defer b.unlockLayout()
	v := &variant{}
	for _, o := range b.objects {
		n := o.node.Copy()
		quoteStringMaps(n.YNode(), false)
		if ns != "" {
			if clusterScoped(o.apiVersion, o.kind) {
				v.conflict = append(v.conflict, conflict{obj: o, reason: "is cluster-scoped"})
				continue
			}
			if o.namespace != "" && o.namespace != ns {
				v.conflict = append(v.conflict, conflict{obj: o, reason: fmt.Sprintf("is in namespace %q", o.namespace)})
				continue
			}
			if err := n.SetNamespace(ns); err != nil {
				return nil, fmt.Errorf("setting namespace of %s: %w", o.id(), err)
			}
		} else if o.kind == "Namespace" && o.apiVersion == "v1" {
			if err := labelNamespace(n, psa); err != nil {
				return nil, fmt.Errorf("labelling %s: %w", o.id(), err)
			}
		}
		text, err := n.String()
		if err != nil {
			return nil, fmt.Errorf("serialising %s: %w", o.id(), err)
		}
		t, refs, bad := compile(text)
		d := doc{tmpl: t, kind: o.kind, name: o.name}
		if t.vars {
			d.shape = n.YNode()
			d.inert = inertDoc(d, text)
			if base, ok := hashSuffixed(n); ok {
				v.hashed = append(v.hashed, hashedDoc{doc: len(v.docs), base: base, name: o.name})
			}
		}
		v.docs = append(v.docs, d)
		v.size += len(text) + 4
		v.refs = append(v.refs, refs...)
		v.bad = append(v.bad, bad...)
	}
	v.refs, v.bad = uniq(v.refs), uniq(v.bad)
	return v, nil
}

// plainNamespace is plainNamespace under the layout lock (it asks kyaml).
func (b *build) plainNamespace(ns string) bool {
	b.lockLayout()
	defer b.unlockLayout()
	return plainNamespace(ns)
}

// lockLayout and unlockLayout hold the renderer's layout lock (none for a build made without
// a renderer).
func (b *build) lockLayout() {
	if b.layoutMu != nil {
		b.layoutMu.Lock()
	}
}

func (b *build) unlockLayout() {
	if b.layoutMu != nil {
		b.layoutMu.Unlock()
	}
}

// hashSuffixed reports whether n is a ConfigMap or Secret that kustomize named
// <base>-<hash of its content> (a configMapGenerator or secretGenerator with the default
// hash suffix), and returns base. The hash is recomputed, so a name that merely looks
// hashed is left alone.
func hashSuffixed(n *kyaml.RNode) (base string, ok bool) {
	if k := n.GetKind(); k != "ConfigMap" && k != "Secret" {
		return "", false
	}
	name := n.GetName()
	i := len(name) - hashLen - 1
	if i < 1 || name[i] != '-' {
		return "", false
	}
	h, err := contentHash(n, name[:i])
	if err != nil || h != name[i+1:] {
		return "", false
	}
	return name[:i], true
}

// hashLen is the length of kustomize's content-hash name suffix.
const hashLen = 10

// contentHash is kustomize's content hash of a ConfigMap or Secret named base, the suffix a
// generator appends to the name.
func contentHash(n *kyaml.RNode, base string) (string, error) {
	c := n.Copy()
	if err := c.SetName(base); err != nil {
		return "", err
	}
	var h hasher.Hasher
	return h.Hash(c)
}

// clusterScoped reports whether objects of this type live outside any
// namespace: kyaml's built-in schema, plus kinds it does not know (common
// third-party and newer ones) that are cluster-scoped whatever the group.
func clusterScoped(apiVersion, kind string) bool {
	switch kind {
	case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
		"PersistentVolume", "StorageClass", "ValidatingWebhookConfiguration",
		"MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
		"MutatingAdmissionPolicyBinding", "APIService", "IngressClass",
		"PriorityClass", "RuntimeClass", "Node", "CSIDriver", "CSINode",
		"VolumeAttachment", "CertificateSigningRequest", "FlowSchema",
		"PriorityLevelConfiguration", "PodSecurityPolicy", "ClusterIssuer",
		"VolumeSnapshotClass", "GatewayClass", "ClusterTrustBundle",
		"IPAddress", "ServiceCIDR", "DeviceClass":
		return true
	}
	return openapi.IsCertainlyClusterScoped(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind})
}

// kyamlNode is a parsed YAML document.
type kyamlNode struct{ kyaml.Node }

// kindName returns the kind and metadata.name of a parsed object.
func (n *kyamlNode) kindName() (kind, name string) {
	root := n.Content[0]
	if k := field(root, "kind"); k != nil {
		kind = k.Value
	}
	if nm := field(field(root, "metadata"), "name"); nm != nil {
		name = nm.Value
	}
	return kind, name
}

// stringMapKey reports the fields whose values Kubernetes requires to be strings: labels and
// annotations, and label selectors (matchLabels, nodeSelector, a Service's selector).
func stringMapKey(k string) bool {
	switch k {
	case "labels", "annotations", "matchLabels", "nodeSelector", "selector":
		return true
	}
	return false
}

// quoteStringMaps double-quotes the values of string maps (stringMapKey) that reference a
// variable. kustomize rewrites these maps and drops the quotes a manifest had, so "${flag}"
// substituted with false would become a boolean.
func quoteStringMaps(n *kyaml.Node, stringMap bool) {
	switch n.Kind {
	case kyaml.DocumentNode, kyaml.SequenceNode:
		for _, c := range n.Content {
			quoteStringMaps(c, false)
		}
	case kyaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if stringMap && v.Kind == kyaml.ScalarNode && strings.Contains(v.Value, "${") {
				v.Style = kyaml.DoubleQuotedStyle
				v.Tag = "!!str"
				continue
			}
			quoteStringMaps(v, stringMapKey(k.Value))
		}
	}
}

// nonStringValues lists the labels and annotations whose value is not a
// string, which the API server would reject.
func nonStringValues(n *kyaml.Node, stringMap bool, out *[]string) {
	switch n.Kind {
	case kyaml.DocumentNode, kyaml.SequenceNode:
		for _, c := range n.Content {
			nonStringValues(c, false, out)
		}
	case kyaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if stringMap {
				if v.Kind != kyaml.ScalarNode || v.ShortTag() != "!!str" {
					*out = append(*out, k.Value)
				}
				continue
			}
			nonStringValues(v, k.Value == "labels" || k.Value == "annotations" || k.Value == "matchLabels" || k.Value == "nodeSelector", out)
		}
	}
}
