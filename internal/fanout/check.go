package fanout

import (
	"fmt"
	"path"
	"sort"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
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

// precheck parses every kustomization of an app before kustomize sees it and
// rejects what must never run inside fleetbot: anything remote (kustomize
// would shell out to git or fetch over HTTP), paths escaping the app
// directory, Helm inflation (needs a helm binary) and non-builtin plugins
// (exec or container functions). It also reports missing local resources,
// which kustomize would otherwise try to fetch as remote targets.
func precheck(files map[string][]byte) []problem { return precheckFiles(files, true) }

// precheckFiles is precheck over any tree of files: a catalog app needs a
// kustomization.yaml at its root (needRoot), a workspace or cluster repo has
// several entry points and none at the root.
func precheckFiles(files map[string][]byte, needRoot bool) []problem {
	c := &checker{files: files, dirs: map[string]bool{}}
	for p := range files {
		for d := path.Dir(p); d != "." && !c.dirs[d]; d = path.Dir(d) {
			c.dirs[d] = true
		}
	}
	hasRoot := false
	var names []string
	for p := range files {
		if isKustomization(p) {
			names = append(names, p)
			if path.Dir(p) == "." {
				hasRoot = true
			}
		}
	}
	sort.Strings(names)
	if needRoot && !hasRoot {
		c.add("kustomization.yaml", 0, "the app directory has no kustomization.yaml",
			"add a kustomization.yaml listing the app's manifests under resources")
	}
	for _, n := range names {
		c.kustomization(n)
	}
	return c.problems
}

type checker struct {
	files    map[string][]byte
	dirs     map[string]bool
	problems []problem
}

func (c *checker) add(file string, line int, msg, hint string) {
	c.problems = append(c.problems, problem{File: file, Line: line, Message: msg, Hint: hint})
}

func (c *checker) exists(p string) bool {
	_, isFile := c.files[p]
	return isFile || c.dirs[p] || p == "."
}

func (c *checker) kustomization(file string) {
	var doc kyaml.Node
	if err := kyaml.Unmarshal(c.files[file], &doc); err != nil {
		c.add(file, 0, fmt.Sprintf("%s is not valid YAML: %v", file, err), "fix the YAML syntax")
		return
	}
	if len(doc.Content) == 0 {
		return
	}
	root := doc.Content[0]
	if root.Kind != kyaml.MappingNode {
		c.add(file, root.Line, file+" is not a YAML mapping", "a kustomization is a mapping with resources, patches, ...")
		return
	}
	dir := path.Dir(file)
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		switch key.Value {
		case "resources", "bases", "components":
			for _, n := range scalars(val) {
				if c.ref(file, dir, key.Value, n) {
					if p := path.Join(dir, n.Value); !c.exists(p) {
						c.add(file, n.Line, fmt.Sprintf("%s entry %q does not exist in the app directory", key.Value, n.Value),
							"add the file to the app directory or remove the entry; fleetbot renders only local files")
					}
				}
			}
		case "crds", "configurations":
			for _, n := range scalars(val) {
				c.ref(file, dir, key.Value, n)
			}
		case "helmCharts", "helmChartInflationGenerator", "helmGlobals":
			c.add(file, key.Line, fmt.Sprintf("uses %s: Helm inflation is not supported", key.Value),
				"render the chart once (helm template) and commit the manifests to the app directory")
		case "generators", "transformers", "validators":
			for _, n := range seq(val) {
				c.plugin(file, dir, key.Value, n)
			}
		case "patches", "patchesJson6902", "replacements":
			for _, item := range seq(val) {
				if p := field(item, "path"); p != nil {
					c.ref(file, dir, key.Value, p)
				}
			}
		case "patchesStrategicMerge":
			for _, n := range scalars(val) {
				if !strings.Contains(n.Value, "\n") {
					c.ref(file, dir, key.Value, n)
				}
			}
		case "configMapGenerator", "secretGenerator":
			for _, item := range seq(val) {
				for _, f := range []string{"files", "envs", "env"} {
					v := field(item, f)
					if v == nil {
						continue
					}
					list := scalars(v)
					if v.Kind == kyaml.ScalarNode {
						list = []*kyaml.Node{v}
					}
					for _, n := range list {
						src := *n
						if _, after, ok := strings.Cut(src.Value, "="); ok && f == "files" {
							src.Value = after
						}
						c.ref(file, dir, key.Value+"."+f, &src)
					}
				}
			}
		case "openapi":
			if p := field(val, "path"); p != nil {
				c.ref(file, dir, key.Value, p)
			}
		}
	}
}

// ref checks one path-like entry of a kustomization, reporting remote
// references and escapes. It returns true when the entry is a local path
// inside the app directory.
func (c *checker) ref(file, dir, key string, n *kyaml.Node) bool {
	v := n.Value
	if isRemote(v) {
		c.add(file, n.Line, fmt.Sprintf("%s entry %q is remote", key, v),
			"vendor the manifests into the app directory: fleetbot renders only the files of the control repo")
		return false
	}
	if path.IsAbs(v) {
		c.add(file, n.Line, fmt.Sprintf("%s entry %q is an absolute path", key, v),
			"use a path relative to the kustomization, inside the app directory")
		return false
	}
	if p := path.Clean(path.Join(dir, v)); p == ".." || strings.HasPrefix(p, "../") {
		c.add(file, n.Line, fmt.Sprintf("%s entry %q escapes the app directory", key, v),
			"an app renders only its own directory: copy the shared files into it")
		return false
	}
	return true
}

// plugin checks a generators/transformers/validators entry: a path to a
// kustomization directory or a plugin config file, or an inline config.
func (c *checker) plugin(file, dir, key string, n *kyaml.Node) {
	switch n.Kind {
	case kyaml.MappingNode:
		c.pluginConfig(file, key, n)
	case kyaml.ScalarNode:
		if strings.Contains(n.Value, "\n") {
			var doc kyaml.Node
			if err := kyaml.Unmarshal([]byte(n.Value), &doc); err == nil && len(doc.Content) > 0 {
				inline := *doc.Content[0]
				inline.Line = n.Line
				c.pluginConfig(file, key, &inline)
			}
			return
		}
		if !c.ref(file, dir, key, n) {
			return
		}
		p := path.Join(dir, n.Value)
		data, isFile := c.files[p]
		if !isFile {
			if !c.dirs[p] {
				c.add(file, n.Line, fmt.Sprintf("%s entry %q does not exist in the app directory", key, n.Value),
					"add the file to the app directory or remove the entry")
			}
			return // a kustomization directory: checked on its own
		}
		dec := kyaml.NewDecoder(strings.NewReader(string(data)))
		for {
			var doc kyaml.Node
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if len(doc.Content) > 0 {
				cfg := *doc.Content[0]
				cfg.Line = n.Line
				c.pluginConfig(file, key, &cfg)
			}
		}
	}
}

// pluginConfig rejects anything but kustomize's built-in plugins: an
// external plugin would exec a binary or run a container.
func (c *checker) pluginConfig(file, key string, n *kyaml.Node) {
	apiVersion, kind := "", ""
	if v := field(n, "apiVersion"); v != nil {
		apiVersion = v.Value
	}
	if v := field(n, "kind"); v != nil {
		kind = v.Value
	}
	if apiVersion != "builtin" {
		c.add(file, n.Line, fmt.Sprintf("%s entry %s (apiVersion %q) is not a built-in kustomize plugin", key, kind, apiVersion),
			"only built-in plugins (apiVersion: builtin) run in fleetbot: exec and container functions are disabled")
	}
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

func seq(n *kyaml.Node) []*kyaml.Node {
	if n == nil || n.Kind != kyaml.SequenceNode {
		return nil
	}
	return n.Content
}

func scalars(n *kyaml.Node) []*kyaml.Node {
	var out []*kyaml.Node
	for _, c := range seq(n) {
		if c.Kind == kyaml.ScalarNode {
			out = append(out, c)
		}
	}
	return out
}

// isRemote reports whether kustomize would treat v as a remote target or URL.
func isRemote(v string) bool {
	l := strings.ToLower(v)
	if strings.Contains(l, "://") || strings.HasPrefix(l, "git@") || strings.HasPrefix(l, "git::") ||
		strings.Contains(l, "?ref=") || strings.Contains(l, "?version=") || strings.Contains(l, "?timeout=") ||
		strings.Contains(l, "?submodules=") || strings.Contains(l, "//") {
		return true
	}
	for _, host := range []string{"github.com/", "gitlab.com/", "bitbucket.org/", "dev.azure.com/"} {
		if strings.HasPrefix(l, host) {
			return true
		}
	}
	return false
}
