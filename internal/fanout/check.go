package fanout

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/yamlsize"
)

// problem is a render problem inside one app directory. File is relative to
// the app dir; the caller turns it into a control.Issue naming the app.
type problem struct {
	File    string
	Line    int
	Message string
	Hint    string
}

// isKustomization reports whether p is a file kustomize reads as a
// kustomization.
func isKustomization(p string) bool {
	switch path.Base(p) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// precheck is closeTree for a catalog app, keeping only the problems.
func precheck(files map[string][]byte) []problem {
	_, probs := closeTree(files, []string{"."}, true)
	return probs
}

// kustomizationNames are the file names kustomize reads as a directory's
// kustomization, in its order of preference.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// closeTree makes a tree of files safe to hand to kustomize: rendering is
// closed, it never starts a process or opens a connection.
//
// kustomize's loader clones any path its own git-URL parser accepts (with
// the git binary, whatever filesystem the build runs on) and fetches any
// http(s) URL it is asked to load; krusty offers no option to turn either
// off. So the loader never gets to decide: every kustomization reachable
// from the entry directories is decoded with kustomize's own decoder
// (types.Kustomization.Unmarshal: the same case-insensitive keys, anchors
// and merge keys kustomize sees), every path it names must be a file or
// directory of the tree, and the staged kustomization is re-encoded from
// that decoded value with each path rewritten to an explicit relative form
// ("./x" or "../x"), which kustomize's git-URL parser refuses (no scheme, no
// user@, no github.com prefix) and which is never a URL. A kustomization no
// entry reaches is not staged at all. Entries in a remote form, absolute
// paths, paths leaving the tree, Helm inflation (a helm process) and
// non-builtin plugins (exec or container functions) are problems; so is an
// http(s) URL anywhere in a builtin plugin's config (its loads go through
// the same loader). A catalog app needs a kustomization.yaml at its root
// (needRoot).
//
// staged holds the files to build from, reachable kustomizations
// rewritten; it is meaningful only when there are no problems.
func closeTree(files map[string][]byte, entries []string, needRoot bool) (staged map[string][]byte, problems []problem) {
	c := &checker{files: files, dirs: map[string]bool{}, visited: map[string]bool{}}
	// Bounded input: a YAML alias bomb in any file (a few hundred bytes for billions of nodes)
	// is refused before anything decodes it, here or in kustomize.
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := yamlsize.Check(files[p], yamlsize.DefaultMaxNodes); err != nil {
			c.add(p, 0, err.Error(), "remove the YAML aliases (*name) that expand the file")
		}
	}
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	for p := range files {
		for d := path.Dir(p); d != "." && !c.dirs[d]; d = path.Dir(d) {
			c.dirs[d] = true
		}
	}
	if needRoot && c.kustomizationIn(".") == "" {
		c.add("kustomization.yaml", 0, "the app directory has no kustomization.yaml",
			"add a kustomization.yaml listing the app's manifests under resources")
	}
	var others []string
	for p := range files {
		if !isKustomization(p) {
			others = append(others, p)
		}
	}
	sort.Strings(others)
	staged = make(map[string][]byte, len(files))
	for _, p := range others {
		staged[p] = files[p]
		c.builtinConfigs(p)
	}
	c.queue = append(c.queue, entries...)
	for len(c.queue) > 0 {
		dir := path.Clean(c.queue[0])
		c.queue = c.queue[1:]
		if c.visited[dir] {
			continue
		}
		c.visited[dir] = true
		n := c.kustomizationIn(dir)
		if n == "" {
			continue // kustomize reports a directory without one
		}
		if data, ok := c.kustomization(n); ok {
			staged[n] = data
		}
	}
	sort.SliceStable(c.problems, func(a, b int) bool {
		pa, pb := c.problems[a], c.problems[b]
		if pa.File != pb.File {
			return pa.File < pb.File
		}
		return pa.Line < pb.Line
	})
	return staged, c.problems
}

type checker struct {
	files    map[string][]byte
	dirs     map[string]bool
	problems []problem
	// queue holds the directories still to visit, visited those done.
	queue   []string
	visited map[string]bool
}

// kustomizationIn returns the kustomization file kustomize reads in dir,
// or "".
func (c *checker) kustomizationIn(dir string) string {
	for _, name := range kustomizationNames {
		p := path.Join(dir, name)
		if _, ok := c.files[p]; ok {
			return p
		}
	}
	return ""
}

func (c *checker) add(file string, line int, msg, hint string) {
	c.problems = append(c.problems, problem{File: file, Line: line, Message: msg, Hint: hint})
}

func (c *checker) exists(p string) bool {
	_, isFile := c.files[p]
	return isFile || c.dirs[p] || p == "."
}

// kustomization checks one kustomization file and returns it re-encoded
// with every path in its explicit local form.
func (c *checker) kustomization(file string) ([]byte, bool) {
	var doc kyaml.Node
	if err := kyaml.Unmarshal(c.files[file], &doc); err != nil {
		c.add(file, 0, fmt.Sprintf("%s is not valid YAML: %v", file, err), "fix the YAML syntax")
		return nil, false
	}
	var k types.Kustomization
	if err := k.Unmarshal(c.files[file]); err != nil {
		c.add(file, 0, fmt.Sprintf("%s is not a valid kustomization: %v", file, err),
			"a kustomization is a mapping of kustomize's fields (resources, patches, ...)")
		return nil, false
	}
	before := len(c.problems)
	e := &entries{c: c, file: file, dir: path.Dir(file), doc: &doc}

	e.dirOrFile("resources", k.Resources)
	//lint:ignore SA1019 kustomize still reads bases, so the check must confine them too.
	e.dirOrFile("bases", k.Bases)
	e.dirOrFile("components", k.Components)
	e.files("crds", k.Crds)
	e.files("configurations", k.Configurations)
	for i := range k.Patches {
		e.optionalFile("patches", &k.Patches[i].Path)
	}
	//lint:ignore SA1019 kustomize still reads patchesJson6902, so the check must confine them too.
	for i := range k.PatchesJson6902 {
		e.optionalFile("patchesJson6902", &k.PatchesJson6902[i].Path) //lint:ignore SA1019 as above
	}
	for i := range k.Replacements {
		e.optionalFile("replacements", &k.Replacements[i].Path)
	}
	//lint:ignore SA1019 kustomize still reads patchesStrategicMerge, so the check must confine them too.
	for i, p := range k.PatchesStrategicMerge {
		// An entry is a file when one of that name exists, otherwise an
		// inline patch; kustomize tries the file first.
		s := string(p)
		if isRemote(s) || c.exists(path.Join(e.dir, s)) && !strings.Contains(s, "\n") {
			if local, ok := e.ref("patchesStrategicMerge", s); ok {
				k.PatchesStrategicMerge[i] = types.PatchStrategicMerge(local) //lint:ignore SA1019 as above
			}
		}
	}
	for i := range k.ConfigMapGenerator {
		e.kvSources("configMapGenerator", &k.ConfigMapGenerator[i].KvPairSources)
	}
	for i := range k.SecretGenerator {
		e.kvSources("secretGenerator", &k.SecretGenerator[i].KvPairSources)
	}
	if p, ok := k.OpenAPI["path"]; ok {
		if local, ok := e.ref("openapi", p); ok {
			k.OpenAPI["path"] = local
		}
	}
	for _, key := range []struct {
		name string
		set  bool
	}{
		{"helmCharts", len(k.HelmCharts) > 0},
		{"helmChartInflationGenerator", len(k.HelmChartInflationGenerator) > 0},
		{"helmGlobals", k.HelmGlobals != nil},
	} {
		if key.set || keyLine(&doc, key.name) > 0 {
			c.add(file, keyLine(&doc, key.name), fmt.Sprintf("uses %s: Helm inflation is not supported", key.name),
				"render the chart once (helm template) and commit the manifests to the app directory")
		}
	}
	e.plugins("generators", k.Generators)
	e.plugins("transformers", k.Transformers)
	e.plugins("validators", k.Validators)

	if len(c.problems) > before {
		return nil, false
	}
	out, err := yaml.Marshal(&k)
	if err != nil {
		c.add(file, 0, fmt.Sprintf("cannot re-encode %s: %v", file, err), "simplify the kustomization")
		return nil, false
	}
	// An explicit "resources: []" makes a kustomization non-empty for
	// kustomize; the encoding drops empty lists, so say it again.
	var again types.Kustomization
	if k.CheckEmpty() == nil && again.Unmarshal(out) == nil && again.CheckEmpty() != nil {
		out = append(out, "resources: []\n"...)
	}
	return out, true
}

// entries checks and rewrites the path entries of one kustomization.
type entries struct {
	c         *checker
	file, dir string
	doc       *kyaml.Node
}

// ref checks one path-like entry and returns its explicit local form
// ("./x" or "../x"), which kustomize's loader can only read from the
// staged tree. ok is false, with a problem reported, for a remote form,
// an absolute path or a path leaving the tree.
func (e *entries) ref(key, v string) (local string, ok bool) {
	return e.refAt(key, v, valueLine(e.doc, v))
}

// refAt is ref for an entry at a known line.
func (e *entries) refAt(key, v string, line int) (local string, ok bool) {
	if isRemote(v) {
		e.c.add(e.file, line, fmt.Sprintf("%s entry %q is remote", key, v),
			"vendor the manifests into the app directory: fleetbot renders only the files of the control repo")
		return "", false
	}
	if v == "" || path.IsAbs(v) {
		e.c.add(e.file, line, fmt.Sprintf("%s entry %q is an absolute path", key, v),
			"use a path relative to the kustomization, inside the app directory")
		return "", false
	}
	if p := path.Clean(path.Join(e.dir, v)); p == ".." || strings.HasPrefix(p, "../") {
		e.c.add(e.file, line, fmt.Sprintf("%s entry %q escapes the app directory", key, v),
			"an app renders only its own directory: copy the shared files into it")
		return "", false
	}
	clean := path.Clean(v)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return clean, true
	}
	return "./" + clean, true
}

// mustExist reports an entry naming nothing in the tree: kustomize would
// otherwise go looking for it elsewhere.
func (e *entries) mustExist(key, v, local string) bool {
	if !e.c.exists(path.Join(e.dir, local)) {
		e.c.add(e.file, valueLine(e.doc, v), fmt.Sprintf("%s entry %q does not exist in the app directory", key, v),
			"add the file to the app directory or remove the entry; fleetbot renders only local files")
		return false
	}
	return true
}

// dirOrFile checks and rewrites a list of files or kustomization
// directories (resources, bases, components).
func (e *entries) dirOrFile(key string, list []string) {
	for i, v := range list {
		if local, ok := e.ref(key, v); ok && e.mustExist(key, v, local) {
			list[i] = local
			e.visit(local)
		}
	}
}

// visit queues the directory an entry names, if it is one, so its
// kustomization is checked and staged too.
func (e *entries) visit(local string) {
	if p := path.Join(e.dir, local); e.c.dirs[p] || p == "." {
		e.c.queue = append(e.c.queue, p)
	}
}

// files checks and rewrites a list of file paths.
func (e *entries) files(key string, list []string) {
	for i, v := range list {
		if local, ok := e.ref(key, v); ok {
			list[i] = local
		}
	}
}

// optionalFile checks and rewrites a path field that may be empty.
func (e *entries) optionalFile(key string, p *string) {
	if *p == "" {
		return
	}
	if local, ok := e.ref(key, *p); ok {
		*p = local
	}
}

// kvSources checks and rewrites a generator's files ([key=]path), envs and
// env.
func (e *entries) kvSources(key string, s *types.KvPairSources) {
	for i, v := range s.FileSources {
		k, p, hasKey := strings.Cut(v, "=")
		if !hasKey {
			k, p = "", v
		}
		if local, ok := e.refAt(key+".files", p, valueLine(e.doc, v)); ok {
			if hasKey {
				local = k + "=" + local
			}
			s.FileSources[i] = local
		}
	}
	e.files(key+".envs", s.EnvSources)
	e.optionalFile(key+".env", &s.EnvSource)
}

// plugins checks a generators/transformers/validators list: each entry is
// an inline plugin config (when it decodes as objects, as kustomize decides)
// or a path to a config file or a kustomization directory.
func (e *entries) plugins(key string, list []string) {
	for i, v := range list {
		if docs, ok := inlineObjects(v); ok {
			for _, d := range docs {
				e.c.pluginConfig(e.file, valueLine(e.doc, v), key, d)
			}
			continue
		}
		local, ok := e.ref(key, v)
		if !ok {
			continue
		}
		list[i] = local
		e.visit(local)
		p := path.Join(e.dir, local)
		if _, isFile := e.c.files[p]; !isFile {
			if !e.c.dirs[p] {
				e.c.add(e.file, valueLine(e.doc, v), fmt.Sprintf("%s entry %q does not exist in the app directory", key, v),
					"add the file to the app directory or remove the entry")
			}
			continue // a kustomization directory: checked on its own
		}
		docs, err := decodeObjects(e.c.files[p])
		if err != nil {
			e.c.add(p, 0, fmt.Sprintf("%s is not valid YAML: %v", p, err), "fix the YAML syntax")
			continue
		}
		for _, d := range docs {
			e.c.pluginConfig(e.file, valueLine(e.doc, v), key, d)
		}
	}
}

// inlineObjects decodes an inline plugin config: one or more YAML objects.
func inlineObjects(v string) ([]map[string]any, bool) {
	docs, err := decodeObjects([]byte(v))
	if err != nil || len(docs) == 0 {
		return nil, false
	}
	return docs, true
}

// decodeObjects decodes every document of a YAML stream as an object, the
// way kustomize reads plugin configs (anchors and merge keys resolved).
func decodeObjects(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	for _, text := range strings.Split("\n"+string(data), "\n---") {
		if strings.TrimSpace(text) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(text), &m); err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// pluginConfig rejects anything but kustomize's built-in plugins (an
// external plugin would exec a binary or run a container), the built-in
// Helm generator (runs helm) and built-in configs that name a URL.
func (c *checker) pluginConfig(file string, line int, key string, obj map[string]any) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion != "builtin" {
		c.add(file, line, fmt.Sprintf("%s entry %s (apiVersion %q) is not a built-in kustomize plugin", key, kind, apiVersion),
			"only built-in plugins (apiVersion: builtin) run in fleetbot: exec and container functions are disabled")
		return
	}
	c.builtinConfig(file, line, obj)
}

// builtinConfig refuses a built-in plugin config that would run helm or
// load a URL.
func (c *checker) builtinConfig(file string, line int, obj map[string]any) {
	kind, _ := obj["kind"].(string)
	if strings.EqualFold(kind, "HelmChartInflationGenerator") {
		c.add(file, line, "uses the HelmChartInflationGenerator plugin: Helm inflation is not supported",
			"render the chart once (helm template) and commit the manifests")
		return
	}
	for _, u := range urlsIn(obj) {
		c.add(file, line, fmt.Sprintf("built-in plugin %s names %q: kustomize would fetch it", kind, u),
			"vendor the file into the repo and name it by a relative path")
	}
}

// builtinConfigs checks the built-in plugin configs among a file's
// documents: a generators or transformers entry may name a directory whose
// kustomization lists them as resources.
func (c *checker) builtinConfigs(file string) {
	if ext := path.Ext(file); ext != ".yaml" && ext != ".yml" && ext != ".json" {
		return
	}
	docs, err := decodeObjects(c.files[file])
	if err != nil {
		return // not a plugin config; kustomize reports bad manifests itself
	}
	for _, d := range docs {
		if v, _ := d["apiVersion"].(string); v == "builtin" {
			c.builtinConfig(file, 0, d)
		}
	}
}

// urlsIn lists the string values of a decoded object that kustomize's
// loader would fetch over HTTP (its IsRemoteFile test).
func urlsIn(v any) []string {
	switch x := v.(type) {
	case string:
		if isURL(x) {
			return []string{x}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			out = append(out, urlsIn(x[k])...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, urlsIn(e)...)
		}
		return out
	}
	return nil
}

// isURL is kustomize's test for a file it loads over HTTP.
func isURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}

// gitUser is the user@ prefix kustomize's git-URL parser accepts.
var gitUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// isRemote reports whether kustomize could treat v as a remote target: an
// http(s) URL it fetches, or anything its git-URL parser could accept (a
// scheme, a user@ prefix or a github.com host, after an optional git::),
// plus the markers of go-getter style references. It only chooses the
// message: closeTree's rewrite to an explicit relative path is what keeps
// kustomize's loader local whatever this says.
func isRemote(v string) bool {
	if isURL(v) {
		return true
	}
	l := strings.ToLower(v)
	l = strings.TrimPrefix(l, "git::")
	for _, prefix := range []string{"ssh://", "https://", "http://", "file://", "github.com/", "github.com:"} {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	if gitUser.MatchString(l) || strings.HasPrefix(strings.ToLower(v), "git::") {
		return true
	}
	if strings.Contains(l, "://") || strings.Contains(l, "?ref=") || strings.Contains(l, "?version=") ||
		strings.Contains(l, "?timeout=") || strings.Contains(l, "?submodules=") || strings.Contains(l, "//") {
		return true
	}
	for _, host := range []string{"gitlab.com/", "bitbucket.org/", "dev.azure.com/"} {
		if strings.HasPrefix(l, host) {
			return true
		}
	}
	return false
}

// valueLine is the line of the first scalar of the parsed document whose
// value is v, or 0 (a value built by a YAML tag or merge).
func valueLine(doc *kyaml.Node, v string) int {
	var find func(n *kyaml.Node) int
	find = func(n *kyaml.Node) int {
		if n == nil {
			return 0
		}
		if n.Kind == kyaml.ScalarNode && n.Value == v {
			return n.Line
		}
		for i, ch := range n.Content {
			if n.Kind == kyaml.MappingNode && i%2 == 0 {
				continue // keys
			}
			if l := find(ch); l > 0 {
				return l
			}
		}
		return 0
	}
	return find(doc)
}

// keyLine is the line of top-level key name (matched as kustomize does,
// case-insensitively), or 0.
func keyLine(doc *kyaml.Node, name string) int {
	if len(doc.Content) == 0 {
		return 0
	}
	root := doc.Content[0]
	if root.Kind != kyaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if strings.EqualFold(root.Content[i].Value, name) {
			return root.Content[i].Line
		}
	}
	return 0
}

// field returns the value of key name in mapping n, or nil.
func field(n *kyaml.Node, name string) *kyaml.Node {
	if n == nil || n.Kind != kyaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i+1]
		}
	}
	return nil
}

// CloseApp returns the files of a catalog app as kustomize may build them
// without ever starting a process or opening a connection (see closeTree),
// or an error listing why it cannot. For callers outside the renderer that
// run krusty on an app themselves.
func CloseApp(files map[string][]byte) (map[string][]byte, error) {
	staged, probs := closeTree(files, []string{"."}, true)
	if len(probs) == 0 {
		return staged, nil
	}
	msgs := make([]string, len(probs))
	for i, p := range probs {
		msgs[i] = p.File
		if p.Line > 0 {
			msgs[i] += fmt.Sprintf(":%d", p.Line)
		}
		msgs[i] += ": " + p.Message
	}
	return nil, fmt.Errorf("app cannot be built offline: %s", strings.Join(msgs, "; "))
}
