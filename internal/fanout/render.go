package fanout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
)

// DefaultGitURL is the base of the repo URLs written into Flux GitRepository
// objects when Options.GitURL is empty.
const DefaultGitURL = "https://github.com"

// Options configures a Renderer.
type Options struct {
	// GitURL is the base URL of target repos (default DefaultGitURL); a
	// workspace repo's URL is GitURL/<owner>/<repo>. Set it for GitHub
	// Enterprise or the local forge.
	GitURL string
	// Logger receives debug logs of builds and cache use (default: discard).
	Logger *slog.Logger
}

// Stats counts a Renderer's work since it was created.
type Stats struct {
	// Renders is the number of Render calls.
	Renders int `json:"renders"`
	// Builds is the number of kustomize builds executed.
	Builds int `json:"builds"`
	// CacheHits is the number of app renders served from the build cache.
	CacheHits int `json:"cacheHits"`
	// Cached is the number of builds held in the cache now.
	Cached int `json:"cached"`
}

// Renderer turns a control repo into the desired tree of every target repo.
// It keeps a cache of kustomize builds keyed by the content of each app's
// files, so a Render after a small change to the control repo rebuilds only
// the apps that changed. A Renderer is safe for concurrent use; Render calls
// are serialised because kustomize is not.
type Renderer struct {
	mu         sync.Mutex
	gitURL     string
	log        *slog.Logger
	kustomizer *krusty.Kustomizer
	// layoutMu serialises the builds' layouts (see build.layoutMu).
	layoutMu   sync.Mutex
	cache      map[string]*build
	generation int
	stats      Stats
	// hashes caches the git hashes of what the renderer's targets hold, across renders: a
	// service plans every target of each new render, and nearly all its files are the last
	// render's (Target.BlobHashes, Target.Hasher).
	hashes *gittree.Cache
	// exact turns off the shortcuts that avoid re-serialising and re-parsing (relayout, inert
	// values), so tests can compare both ways.
	exact bool
	// forceWorkers, when set, is the number of goroutines laying out targets (tests).
	forceWorkers int
	// fluxWorkspaces memoises the Flux objects of a workspace on a cluster (fluxWorkspace), by
	// everything they depend on: rendering them was a tenth of a warm render.
	fluxWorkspaces *memo[fluxInput]
}

// NewRenderer returns a Renderer with an empty build cache.
func NewRenderer(opts Options) *Renderer {
	r := &Renderer{
		gitURL: strings.TrimSuffix(opts.GitURL, "/"),
		log:    opts.Logger,
		cache:  map[string]*build{},
		hashes: gittree.NewCache(gittree.DefaultCacheBytes),

		fluxWorkspaces: newMemo[fluxInput](),
	}
	if r.gitURL == "" {
		r.gitURL = DefaultGitURL
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ko := krusty.MakeDefaultOptions()
	ko.PluginConfig = types.DisabledPluginConfig()
	ko.LoadRestrictions = types.LoadRestrictionsRootOnly
	ko.Reorder = krusty.ReorderOptionLegacy
	r.kustomizer = krusty.MakeKustomizer(ko)
	return r
}

// Stats returns the Renderer's counters.
func (r *Renderer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Cached = len(r.cache)
	return s
}

// Render computes the desired state of every target repo of the control
// repo: one Target per cluster and one per workspace, sorted by kind then
// name. Every catalog app is built by kustomize once per distinct input,
// then laid out per cluster with its values substituted. When anything is
// wrong the error is a control.Issues listing every problem with file:line
// and no targets are returned, so callers write nothing. Targets may share
// file contents (identical app files of many clusters are one slice):
// treat Files and Scaffolds as read-only.
func (r *Renderer) Render(repo *control.Repo) ([]*Target, error) {
	return r.RenderContext(context.Background(), repo)
}

// RenderContext is Render that stops when ctx is done: it checks ctx before every app build
// and every target, so a SIGINT or SIGTERM during the render of a large fleet ends it within
// one app build or one target's work, with ctx's error (errors.Is context.Canceled) and no
// targets.
func (r *Renderer) RenderContext(ctx context.Context, repo *control.Repo) ([]*Target, error) {
	if repo == nil || repo.Platform == nil {
		return nil, fmt.Errorf("render: control repo has no platform")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Renders++
	r.generation++
	r.fluxWorkspaces.start(r.generation)

	x := newRun(r, repo, map[string]*build{})
	interrupted := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("render interrupted: %w", context.Cause(ctx))
		}
		return nil
	}
	for _, app := range repo.Apps {
		if err := interrupted(); err != nil {
			return nil, err
		}
		x.buildApp(app)
	}
	r.evict()
	x.namespaceOwners()

	// Deployments are listed cluster by cluster and dropped once laid out: each carries its
	// resolved values, and the whole list of a 10,000-cluster fleet was a quarter of the
	// render's peak heap.
	clusters := sortedClusters(repo.Clusters)
	workspaces := sortedWorkspaces(repo.Workspaces)
	byWorkspace := map[string][]*control.Cluster{}
	for _, c := range clusters {
		byWorkspace[c.Spec.Workspace] = append(byWorkspace[c.Spec.Workspace], c)
	}
	targets := make([]*Target, len(clusters)+len(workspaces))
	// The targets are laid out on several goroutines, each with its own memos and issues,
	// merged in the order one goroutine would have found them.
	forks := x.forks(r.workers(len(targets)))
	if err := inParallel(forks, len(clusters), interrupted, func(f *run, i int) {
		targets[i] = f.clusterTarget(clusters[i], f.deployer.Components(clusters[i]))
	}); err != nil {
		return nil, err
	}
	x.absorb(forks)
	if err := inParallel(forks, len(workspaces), interrupted, func(f *run, i int) {
		w := workspaces[i]
		targets[len(clusters)+i] = f.workspaceTarget(w, byWorkspace[w.Metadata.Name], f.deployer)
	}); err != nil {
		return nil, err
	}
	x.absorb(forks)
	targets = append(targets, x.managementTargets()...)
	for _, t := range targets {
		t.hasher = r.hashes
	}
	r.evictFiles()
	r.fluxWorkspaces.evict()
	if err := x.issues.Err(); err != nil {
		return nil, err
	}
	return targets, nil
}

// evict drops builds no app used in the latest Render, so a long-running
// service keeps only what the current control repo needs.
func (r *Renderer) evict() {
	for k, b := range r.cache {
		if b.used != r.generation {
			delete(r.cache, k)
		}
	}
}

// evictFiles drops the rendered app files no deployment used in the latest Render.
func (r *Renderer) evictFiles() {
	for _, b := range r.cache {
		for k, m := range b.files {
			if m.used != r.generation {
				delete(b.files, k)
			}
		}
	}
}

// run is the state of one Render call.
type run struct {
	r      *Renderer
	repo   *control.Repo
	issues control.Issues
	// builds by app name.
	builds map[string]*build
	// fluxHead, fluxApps, fluxComponents (by app) and fluxWorkspace
	// memoise the parts of flux/fleetbot.yaml that do not depend on the
	// cluster.
	fluxHead, fluxApps []byte
	fluxComponents     map[string][]byte
	fluxWorkspace      *memo[fluxInput]
	// componentKustomizations memoises platform/<dir>/kustomization.yaml
	// by directory.
	componentKustomizations map[string][]byte
	// tenancyPolicy memoises platform/fleetbot.flux-tenancy/policy.yaml.
	tenancyPolicy []byte
	// checked memoises the parse check of substituted documents: text ->
	// error message ("" when it parses).
	checked *textChecks
	// seen deduplicates issues reported from per-cluster work.
	seen map[string]bool
	// plainNS memoises plainNamespace by namespace.
	plainNS map[string]bool
	// constants and fileLists share bytes between targets (see constant and
	// fleetbotKustomization).
	constants, fileLists map[string][]byte
	// scratch is a buffer reused for per-target text (see clusterTarget).
	scratch bytes.Buffer
	// deployer lists the deployments of a cluster (it memoises per workspace); a fork's own.
	deployer *control.Deployer
}

// newRun starts the state of one Render call with builds (by app name).
func newRun(r *Renderer, repo *control.Repo, builds map[string]*build) *run {
	return &run{r: r, repo: repo, builds: builds, checked: &textChecks{m: map[string]string{}}, seen: map[string]bool{},
		fluxWorkspace: r.fluxWorkspaces, fluxComponents: map[string][]byte{},
		componentKustomizations: map[string][]byte{}, plainNS: map[string]bool{},
		constants: map[string][]byte{}, fileLists: map[string][]byte{}}
}

// workers is how many goroutines lay out n targets: one per CPU the process may use (at most
// 8), one for a small fleet, where starting them costs more than it saves; r.workers when set
// (tests).
func (r *Renderer) workers(n int) int {
	switch {
	case r.forceWorkers > 0:
		return r.forceWorkers
	case n < 64:
		return 1
	}
	return max(1, min(runtime.GOMAXPROCS(0), 8))
}

// forks returns n runs that lay out targets beside each other: each with memos, issues and a
// deployer of its own, sharing x's builds (read-only once built; their own memos are locked)
// and parse checks.
func (x *run) forks(n int) []*run {
	out := make([]*run, n)
	for i := range out {
		out[i] = newRun(x.r, x.repo, x.builds)
		out[i].checked, out[i].deployer = x.checked, x.repo.Deployer()
	}
	return out
}

// inParallel calls do(fork, i) for every i < n, on one goroutine per fork, each over a
// contiguous range of i in order. Each goroutine calls stop before every call and ends at its
// first error, which inParallel returns (the first in fork order).
func inParallel(forks []*run, n int, stop func() error, do func(x *run, i int)) error {
	errs := make([]error, len(forks))
	var wg sync.WaitGroup
	for w, x := range forks {
		from, to := w*n/len(forks), (w+1)*n/len(forks)
		wg.Go(func() {
			defer func() {
				// A panic on this goroutine would end the process (serve's jobs recover theirs
				// on the job's goroutine): an error of the render instead.
				if v := recover(); v != nil {
					errs[w] = fmt.Errorf("render failed: %v (a bug in fleetbot: please report it)", v)
				}
			}()
			for i := from; i < to; i++ {
				if errs[w] = stop(); errs[w] != nil {
					return
				}
				do(x, i)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// absorb adds the issues the forks found, in fork order (the order of one goroutine going
// through the targets), each once, and empties the forks' lists.
func (x *run) absorb(forks []*run) {
	for _, f := range forks {
		for _, i := range f.issues {
			x.addIssueOnce(i)
		}
		f.issues = nil
	}
}

// addOnce adds an issue unless the same one was added already.
func (x *run) addOnce(pos control.Position, hint, format string, args ...any) {
	x.addIssueOnce(control.Issue{Pos: pos, Message: fmt.Sprintf(format, args...), Hint: hint})
}

// addIssueOnce adds i unless an issue with its position and message was added already.
func (x *run) addIssueOnce(i control.Issue) {
	key := i.Pos.String() + "\x00" + i.Message
	if x.seen[key] {
		return
	}
	x.seen[key] = true
	x.issues = append(x.issues, i)
}

// buildApp renders one catalog app through the cache and reports its
// problems, including references to values the app does not declare: those
// are typos that must not reach a cluster, found once per app.
func (x *run) buildApp(app *control.App) {
	name := app.Metadata.Name
	b, ok := x.r.cached(app)
	if ok {
		x.r.stats.CacheHits++
	}
	b.used = x.r.generation
	x.builds[name] = b

	for _, p := range b.problems {
		x.issues.Add(control.Position{File: path.Join(app.Dir, p.File), Line: p.Line}, p.Hint,
			"app %s: %s", name, p.Message)
	}
	for _, ref := range b.refs {
		if _, ok := app.Spec.Values[ref]; !ok {
			x.issues.Add(locateRef(app, "${"+ref+"}"),
				fmt.Sprintf("declare it under spec.values in %s, fix the name, or write $${%s} for a literal", path.Join(app.Dir, "app.yaml"), ref),
				"app %s references ${%s}, which it does not declare", name, ref)
		}
	}
	for _, bad := range b.bad {
		x.issues.Add(locateRef(app, bad), "write ${name} with a declared value name, or $${...} for a literal",
			"app %s has a malformed substitution %q", name, bad)
	}
}

// cached returns app's build from the cache, running the build when the cache has none
// (ok false); call with r.mu held.
func (r *Renderer) cached(app *control.App) (b *build, ok bool) {
	key := inputHash(app.Files)
	if b, ok = r.cache[key]; ok {
		return b, true
	}
	b = kustomize(r.kustomizer, app.Files)
	b.exact, b.layoutMu = r.exact, &r.layoutMu
	r.stats.Builds++
	r.cache[key] = b
	r.log.Debug("kustomize build", "app", app.Metadata.Name, "objects", len(b.objects), "problems", len(b.problems))
	return b, false
}

// Prebuild runs the kustomize builds of apps the cache does not hold yet, so the Render that
// follows finds them done: the CLI starts it beside the rest of the control repo's load
// (control.Options.Catalog), and builds are a third of a cold render of a large fleet. It
// stops at ctx's end, between builds. A build no Render then uses is dropped by that Render,
// as any build its control repo no longer needs. Prebuild and Render wait for each other.
func (r *Renderer) Prebuild(ctx context.Context, apps []*control.App) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, app := range apps {
		if ctx.Err() != nil {
			return
		}
		r.cached(app)
	}
}

// locateRef finds where an app's manifests write the substitution ref (as
// "${name}" or a malformed "${...}"): the line of the first YAML scalar, in
// path and document order, whose value contains it other than as an
// escaped $${...}. Comments are not searched (kustomize drops them, so a
// reference there substitutes nothing). Files that are not YAML (generator
// inputs such as .env or .properties files) have no nodes, so their lines
// are counted. It falls back to app.yaml's spec.values.
func locateRef(app *control.App, ref string) control.Position {
	for _, p := range slices.Sorted(maps.Keys(app.Files)) {
		data := app.Files[p]
		yamlFile := strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")
		if !yamlFile {
			if i := refIndex(string(data), ref); i >= 0 {
				return control.Position{File: path.Join(app.Dir, p), Line: 1 + strings.Count(string(data[:i]), "\n")}
			}
			continue
		}
		dec := kyaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc kyaml.Node
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if line := scalarLine(&doc, ref); line > 0 {
				return control.Position{File: path.Join(app.Dir, p), Line: line}
			}
		}
	}
	return app.Source.At("spec.values")
}

// refIndex returns the offset of the first ref in text that is not escaped
// by a preceding '$', or -1.
func refIndex(text, ref string) int {
	for off := 0; ; {
		i := strings.Index(text[off:], ref)
		if i < 0 {
			return -1
		}
		i += off
		if i == 0 || text[i-1] != '$' {
			return i
		}
		off = i + len(ref)
	}
}

// scalarLine returns the line of the first scalar under n (keys included)
// whose value holds ref, or 0. In a literal block scalar the line is that of
// the text line holding it; in other scalars, the scalar's first line.
func scalarLine(n *kyaml.Node, ref string) int {
	if n.Kind == kyaml.ScalarNode {
		i := refIndex(n.Value, ref)
		switch {
		case i < 0:
			return 0
		case n.Style&kyaml.LiteralStyle != 0:
			return n.Line + 1 + strings.Count(n.Value[:i], "\n")
		default:
			return n.Line
		}
	}
	for _, c := range n.Content {
		if line := scalarLine(c, ref); line > 0 {
			return line
		}
	}
	return 0
}

// locateObject finds the manifest that defines the rendered object o of an
// app: the line of the kind key of the parsed document with o's kind and name
// (preferring o's namespace), falling back to the app's kustomization.
func locateObject(app *control.App, o object) control.Position {
	file, line := indexDocs(app.Files).locate("", o.kind, o.name, o.namespace, nil, "kustomization.yaml")
	return control.Position{File: path.Join(app.Dir, file), Line: line}
}

func sortedClusters(cs []*control.Cluster) []*control.Cluster {
	out := append([]*control.Cluster(nil), cs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

func sortedWorkspaces(ws []*control.Workspace) []*control.Workspace {
	out := append([]*control.Workspace(nil), ws...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// appFile renders one deployment: the app laid out for its namespace, values
// substituted, under the managed-file header. ok is false when the
// deployment has problems (reported as issues).
func (x *run) appFile(d control.Deployment) ([]byte, bool) {
	app := d.App
	name := app.Metadata.Name
	b := x.builds[name]
	if b == nil || len(b.problems) > 0 {
		return nil, false
	}
	ns, psa := "", ""
	if d.Workspace != nil {
		ns = d.Workspace.Namespace()
	} else {
		psa = x.componentPodSecurity(name)
	}
	v, err := b.variant(ns, psa, x.plainNS)
	if err != nil {
		x.addOnce(control.Position{File: path.Join(app.Dir, "kustomization.yaml")}, "", "app %s: %v", name, err)
		return nil, false
	}
	ok := true
	for _, c := range v.conflict {
		ok = false
		x.addOnce(locateObject(app, c.obj),
			"a workspace app may only contain namespaced objects of its own namespace: move cluster-wide objects to a platform component (scope: cluster)",
			"app %s: %s %s, so it cannot be deployed into workspace %s (namespace %s)",
			name, c.obj.id(), c.reason, d.Workspace.Metadata.Name, ns)
	}
	clusterName := d.Cluster.Metadata.Name
	for _, ref := range v.refs {
		spec, declared := app.Spec.Values[ref]
		if _, set := d.Values[ref]; declared && spec.Required && !set {
			ok = false
			x.addOnce(d.Cluster.Source.At("spec.values"),
				fmt.Sprintf("set spec.values.%s in the cluster, or in the component or workspace entry at %s", ref, d.Source),
				"cluster %s: app %s requires value %s, which is not set", clusterName, name, ref)
		}
	}
	if !ok {
		return nil, false
	}

	// Clusters with the same values for the app's references get the same
	// bytes: render them once and share the slice, in this render and the next
	// ones (build.files).
	var key strings.Builder
	key.WriteString(app.Dir + "\x00" + ns + "\x00" + psa)
	for _, ref := range v.refs {
		key.WriteString("\x00" + d.Values[ref])
	}
	b.mu.Lock()
	m, memo := b.files[key.String()]
	if memo {
		m.used = x.r.generation
	}
	b.mu.Unlock()
	if memo {
		return m.data, true
	}

	var out bytes.Buffer
	out.Grow(v.size + 128)
	out.WriteString("# Managed by fleetbot from " + app.Dir + ". Do not edit: changes are overwritten.\n")
	var one strings.Builder
	texts := make([]string, len(v.docs))
	for i, dc := range v.docs {
		if !dc.tmpl.vars {
			continue
		}
		one.Reset()
		dc.tmpl.apply(&one, d.Values)
		texts[i] = one.String()
		if dc.inert && !x.r.exact && inertValues(dc.tmpl, d.Values) {
			continue // cannot change the structure: no parse needed
		}
		if msg := x.check(texts[i], dc, v); msg != "" {
			ok = false
			x.addOnce(d.Cluster.Source.At("spec.values"),
				"quote the value in the manifest (\"${name}\") or change the value so the YAML stays valid",
				"cluster %s: app %s: %s/%s does not parse after substituting values: %s", clusterName, name, dc.kind, dc.name, msg)
		}
	}
	if !ok {
		return nil, false
	}
	renames, err := rehash(v, texts)
	if err != nil {
		x.addOnce(d.Cluster.Source.At("spec.values"), "", "cluster %s: app %s: %v", clusterName, name, err)
		return nil, false
	}
	for i, dc := range v.docs {
		if i > 0 {
			out.WriteString("---\n")
		}
		switch {
		case renames != nil:
			if !dc.tmpl.vars {
				var lit bytes.Buffer
				dc.tmpl.writeTo(&lit)
				texts[i] = lit.String()
			}
			out.WriteString(renameAll(texts[i], renames))
		case dc.tmpl.vars:
			out.WriteString(texts[i])
		default:
			dc.tmpl.writeTo(&out)
		}
	}
	b.mu.Lock()
	b.files[key.String()] = &fileMemo{data: out.Bytes(), used: x.r.generation}
	b.mu.Unlock()
	return out.Bytes(), true
}

// check parses a substituted document of variant v and makes sure it is still the same
// object with the same structure: a value only ever becomes one scalar. A
// value with YAML syntax in it ("x\n---\nkind: ClusterRoleBinding…", or a
// newline and an indented key) could otherwise add a document, a key or a
// list item to a manifest, or turn a scalar into a map.
func (x *run) check(text string, d doc, v *variant) string {
	x.checked.mu.Lock()
	msg, ok := x.checked.m[text]
	x.checked.mu.Unlock()
	if ok {
		return msg
	}
	msg = checkText(text, d, v.nsFrom, v.nsTo)
	x.checked.mu.Lock()
	x.checked.m[text] = msg
	x.checked.mu.Unlock()
	return msg
}

// memo holds bytes computed once per key by a pure function, for every render of a Renderer
// and the forks of each: the forks share it, and a service's next render finds what the last
// one computed.
type memo[K comparable] struct {
	mu sync.Mutex
	m  map[K]*memoEntry
	// gen is the Render generation now; evict drops what it did not use.
	gen int
}

type memoEntry struct {
	b    []byte
	used int
}

func newMemo[K comparable]() *memo[K] { return &memo[K]{m: map[K]*memoEntry{}} }

// get returns the bytes of key, computing them (under the lock: once) when there are none.
func (m *memo[K]) get(key K, compute func(K) ([]byte, error)) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[key]; ok {
		e.used = m.gen
		return e.b, nil
	}
	b, err := compute(key)
	if err != nil {
		return nil, err
	}
	m.m[key] = &memoEntry{b: b, used: m.gen}
	return b, nil
}

// start begins Render generation gen.
func (m *memo[K]) start(gen int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen = gen
}

// evict drops the entries the current generation did not use.
func (m *memo[K]) evict() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.m {
		if e.used != m.gen {
			delete(m.m, k)
		}
	}
}

// textChecks is the memo of check, shared by the forks of a run: parsing a substituted
// document is the costly part of laying out a target.
type textChecks struct {
	mu sync.Mutex
	m  map[string]string
}

// checkText is check without the memo. A scalar of d's shape equal to nsFrom stands for nsTo
// (see relayout).
func checkText(text string, d doc, nsFrom, nsTo string) string {
	var n kyamlNode
	if extra, err := decodeOne(text, &n); err != nil {
		return err.Error()
	} else if extra > 0 {
		return fmt.Sprintf("a value added %d YAML document(s) (---): a value may only become one scalar", extra)
	} else if kind, name := n.kindName(); kind != d.kind || name != d.name {
		return fmt.Sprintf("it became %s/%s", kind, name)
	} else if where := changedShape(d.shape, &n.Node, "", nsFrom, nsTo); where != "" {
		return "a value changed the structure at " + where + ": a value may only become one scalar"
	}
	var bad []string
	nonStringValues(&n.Node, false, &bad)
	if len(bad) > 0 {
		return fmt.Sprintf("label or annotation %s is not a string", strings.Join(bad, ", "))
	}
	return ""
}

// inertValue reports whether substituting s can only change the scalar it lands in, whatever
// the scalar's style or position: it is not empty, starts with a letter, a digit or '_', and
// holds only letters, digits and "._/-" (no space, quote, backslash, newline, ':' '#' ',' or
// bracket). Values such as names, versions, address ranges and numbers are.
func inertValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case (c == '.' || c == '/' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// inertValues reports whether every value t references is inertValue.
func inertValues(t template, values map[string]string) bool {
	for _, s := range t.segs {
		if s.name != "" && !inertValue(values[s.name]) {
			return false
		}
	}
	return true
}

// inertDoc reports whether d (text is its template text) passes check for any substitution
// of inert values: its kind and name hold no reference, every reference is inside a scalar
// value that is not a key, tagged or anchored (inertShape), and with every reference
// substituted by "x" it passes check (so anything check objects to whatever the values, such
// as a literal non-string label, is still found by the full check).
func inertDoc(d doc, text string) bool {
	if strings.Contains(d.kind, "${") || strings.Contains(d.name, "${") {
		return false
	}
	refs := 0
	if !inertShape(d.shape, false, &refs) {
		return false
	}
	vars := 0
	var sample strings.Builder
	sample.Grow(len(text))
	for _, s := range d.tmpl.segs {
		if s.name != "" {
			vars++
			sample.WriteString("x")
		} else {
			sample.WriteString(s.lit)
		}
	}
	return refs == vars && checkText(sample.String(), d, "", "") == ""
}

// inertShape walks a template's tree, counting the references in scalar values into refs, and
// reports false for what an inert value could still change: a reference in a key, in a tagged
// scalar, or in an unquoted string-map value (label, annotation, ...: kustomize's output
// quotes those, see quoteStringMaps), and aliases or anchors.
func inertShape(n *kyaml.Node, stringMap bool, refs *int) bool {
	if n == nil || n.Kind == kyaml.AliasNode || n.Anchor != "" {
		return false
	}
	switch n.Kind {
	case kyaml.DocumentNode, kyaml.SequenceNode:
		for _, c := range n.Content {
			if !inertShape(c, false, refs) {
				return false
			}
		}
	case kyaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != kyaml.ScalarNode || k.Anchor != "" || strings.Contains(k.Value, "${") {
				return false
			}
			if !inertShape(v, k.Value == "labels" || k.Value == "annotations" || k.Value == "matchLabels" || k.Value == "nodeSelector", refs) {
				return false
			}
		}
	case kyaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return true
		}
		if n.Style&kyaml.TaggedStyle != 0 || stringMap && n.Style&(kyaml.DoubleQuotedStyle|kyaml.SingleQuotedStyle) == 0 {
			return false
		}
		_, r, bad := compile(n.Value)
		if len(bad) > 0 {
			return false
		}
		*refs += len(r)
	}
	return true
}

// rehash recomputes the content hash in the name of every generated ConfigMap and Secret of
// v whose content references a value, from its substituted text: kustomize hashed the
// template, so without this a values change would keep the name and workloads that mount the
// object would not roll. It returns old name -> new name (nil when nothing is renamed).
func rehash(v *variant, texts []string) (map[string]string, error) {
	if len(v.hashed) == 0 {
		return nil, nil
	}
	renames := map[string]string{}
	for _, h := range v.hashed {
		n, err := kyaml.Parse(texts[h.doc])
		if err != nil {
			return nil, fmt.Errorf("rehashing %s: %w", h.name, err)
		}
		sum, err := contentHash(n, h.base)
		if err != nil {
			return nil, fmt.Errorf("rehashing %s: %w", h.name, err)
		}
		renames[h.name] = h.base + "-" + sum
	}
	return renames, nil
}

// renameAll replaces each old name of renames in text by its new name where it stands as a
// whole name (not inside a longer DNS name). Hash-suffixed names are unique in practice: the
// suffix is ten characters of a SHA-256.
func renameAll(text string, renames map[string]string) string {
	olds := make([]string, 0, len(renames))
	for o := range renames {
		olds = append(olds, o)
	}
	sort.Strings(olds)
	for _, o := range olds {
		var b strings.Builder
		rest := text
		for {
			i := strings.Index(rest, o)
			if i < 0 {
				break
			}
			end := i + len(o)
			if (i > 0 && isNameByte(rest[i-1])) || (end < len(rest) && isNameByte(rest[end])) {
				b.WriteString(rest[:end])
			} else {
				b.WriteString(rest[:i] + renames[o])
			}
			rest = rest[end:]
		}
		b.WriteString(rest)
		text = b.String()
	}
	return text
}

// isNameByte reports whether c may be part of a Kubernetes object name.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.'
}

// decodeOne parses the first YAML document of text into n, which must be a mapping, and
// counts the documents after it (each parsed once).
func decodeOne(text string, n *kyamlNode) (extra int, err error) {
	dec := kyaml.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&n.Node); err != nil {
		return 0, err
	}
	if len(n.Content) == 0 || n.Content[0].Kind != kyaml.MappingNode {
		return 0, fmt.Errorf("not a YAML mapping")
	}
	for {
		var more kyaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			return extra, nil
		}
		if err != nil {
			return extra, err
		}
		extra++
	}
}

// changedShape compares a substituted document with its template's tree and returns the path
// of the first difference other than a scalar holding a ${name} that became another scalar:
// a different kind of node, a key added, removed or renamed, a list item added or removed, or
// a literal scalar changed. "" means same shape.
//
// A template scalar equal to nsFrom (when set) stands for nsTo.
func changedShape(tmpl, out *kyaml.Node, path, nsFrom, nsTo string) string {
	if tmpl == nil {
		return ""
	}
	for tmpl.Kind == kyaml.DocumentNode && len(tmpl.Content) == 1 {
		tmpl = tmpl.Content[0]
	}
	for out.Kind == kyaml.DocumentNode && len(out.Content) == 1 {
		out = out.Content[0]
	}
	here := path
	if here == "" {
		here = "the document root"
	}
	if tmpl.Kind != out.Kind {
		return here
	}
	switch tmpl.Kind {
	case kyaml.ScalarNode:
		tv := tmpl.Value
		if nsFrom != "" && tv == nsFrom {
			tv = nsTo
		}
		if !strings.Contains(tv, "${") && tv != out.Value {
			return here
		}
	case kyaml.SequenceNode:
		if len(tmpl.Content) != len(out.Content) {
			return here
		}
		for i := range tmpl.Content {
			if w := changedShape(tmpl.Content[i], out.Content[i], fmt.Sprintf("%s[%d]", path, i), nsFrom, nsTo); w != "" {
				return w
			}
		}
	case kyaml.MappingNode:
		if len(tmpl.Content) != len(out.Content) {
			return here
		}
		for i := 0; i+1 < len(tmpl.Content); i += 2 {
			k := tmpl.Content[i].Value
			if changedShape(tmpl.Content[i], out.Content[i], "", nsFrom, nsTo) != "" {
				return joinPath(path, k)
			}
			if w := changedShape(tmpl.Content[i+1], out.Content[i+1], joinPath(path, k), nsFrom, nsTo); w != "" {
				return w
			}
		}
	}
	return ""
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
