package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fleetbot-io/fleetbot/internal/yamlsize"
)

// Control repo layout.
const (
	platformFile  = "platform.yaml"
	clustersDir   = "clusters"
	workspacesDir = "workspaces"
	catalogDir    = "catalog"
	appFile       = "app.yaml"
)

// Bounds of what a control repo may hold (DESIGN §7: rendering is bounded): a repo past them
// is refused with the file that passed, before anything is decoded or rendered.
const (
	// MaxFileBytes bounds one file (a manifest, a cluster): Kubernetes itself refuses objects
	// over ~1.5 MiB.
	MaxFileBytes = 4 << 20
	// MaxFiles bounds the files read (10,000 clusters and a large catalog fit).
	MaxFiles = 50_000
	// MaxTotalBytes bounds everything read.
	MaxTotalBytes = 256 << 20
)

// kustomizationFiles are the names kustomize accepts for its entry point.
var kustomizationFiles = [...]string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Load reads and validates the control repo in fsys (platform.yaml,
// clusters/, workspaces/, catalog/), applies defaults and returns it.
//
// A repo that cannot be read returns an error wrapping ErrUnreadable. A repo
// that is invalid returns Issues listing every problem found, each with
// file:line and a hint; the repo is then nil, so nobody plans from it.
// Symlinks in fsys follow the one policy of every reader (see resolveLink): a link to a
// regular file inside the repo is read as that file; a link leaving the repo, dangling,
// looping or naming a directory is an issue naming the link and its target. fsys must
// implement fs.ReadLinkFS to read links (os.DirFS, os.Root.FS and fstest.MapFS do).
func Load(fsys fs.FS) (*Repo, error) {
	return LoadWith(fsys, Options{})
}

// LoadCached is Load, taking the clusters whose file (name and content) it decoded before from
// cache (see Cache); a nil cache is Load.
func LoadCached(fsys fs.FS, cache *Cache) (*Repo, error) {
	return LoadWith(fsys, Options{Cache: cache})
}

// Options are the optional parts of a load.
type Options struct {
	// Cache keeps the clusters decoded from files seen before (see LoadCached).
	Cache *Cache
	// Catalog, when set, is called once with the catalog's apps as soon as they are read, before
	// the clusters and workspaces are and before anything is validated, so work that needs only
	// the apps (the renderer's kustomize builds) can run beside the rest of the load. The apps
	// may still be found invalid, and the load may fail. Nothing changes them after the call:
	// they may be read from any goroutine, never written.
	Catalog func(apps []*App)
}

// LoadWith is Load with options.
func LoadWith(fsys fs.FS, o Options) (*Repo, error) {
	return newLoader(fsys, o).load()
}

func newLoader(fsys fs.FS, o Options) *loader {
	return &loader{fsys: fsys, repo: &Repo{}, cache: o.Cache, catalog: o.Catalog, workers: clusterDecodeWorkers()}
}

// load reads, defaults and validates the repo.
func (l *loader) load() (*Repo, error) {
	if err := l.run(); err != nil {
		return nil, err
	}
	l.is = append(l.is, validate(l.repo)...)
	if err := l.is.Err(); err != nil {
		return nil, err
	}
	l.repo.Warnings = warnings(l.repo)
	return l.repo, nil
}

type loader struct {
	fsys  fs.FS
	repo  *Repo
	cache *Cache
	// catalog is Options.Catalog.
	catalog func([]*App)
	// workers is the number of goroutines decoding cluster files (clusterDecodeWorkers).
	workers int
	is      Issues
	// files and bytes count what was read, for the bounds.
	files, bytes int
	// platform is where the Platform was found, for "second Platform" issues.
	platform Position
	// inputs are the files the render reads, for Repo.Digest.
	inputs inputs
}

func (l *loader) run() error {
	entries, err := fs.ReadDir(l.fsys, ".")
	if err != nil {
		return fmt.Errorf("%w: listing the control repo: %w", ErrUnreadable, err)
	}
	top := map[string]fs.DirEntry{}
	for _, e := range entries {
		top[e.Name()] = e
	}
	if err := l.loadPlatform(top); err != nil {
		return err
	}
	// The catalog first: Options.Catalog's work runs beside the rest of the load.
	if err := l.loadCatalog(top); err != nil {
		return err
	}
	if l.catalog != nil {
		l.catalog(slices.Clone(l.repo.Apps)) // a copy: sortRepo sorts the repo's
	}
	if err := l.loadObjects(top, clustersDir, KindCluster); err != nil {
		return err
	}
	if err := l.loadObjects(top, workspacesDir, KindWorkspace); err != nil {
		return err
	}
	if err := l.loadPause(top); err != nil {
		return err
	}
	if err := l.loadRecords(top); err != nil {
		return err
	}
	if err := l.loadCodeowners(top); err != nil {
		return err
	}
	l.repo.Digest = l.inputs.digest()
	applyDefaults(l.repo)
	sortRepo(l.repo)
	return nil
}

// loadPause reads rollout/paused, which pauses every rollout while it exists: its text (at
// most MaxPauseBytes of UTF-8) says why. A rollout entry that is not a directory is not
// fleetbot's and is left alone.
func (l *loader) loadPause(top map[string]fs.DirEntry) error {
	dir, ok := top[path.Dir(PausedFile)]
	if !ok || !dir.IsDir() {
		return nil
	}
	entries, err := fs.ReadDir(l.fsys, path.Dir(PausedFile))
	if err != nil {
		return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, path.Dir(PausedFile), err)
	}
	for _, e := range entries {
		if e.Name() != path.Base(PausedFile) {
			continue
		}
		from, ok := l.source(PausedFile, e)
		if !ok {
			return nil
		}
		if info, err := fs.Stat(l.fsys, from); err == nil && info.Size() > MaxPauseBytes {
			l.is.Add(Position{File: PausedFile}, "write a line saying why the rollout is paused (fleetbot rollout pause --reason ...)",
				"%d bytes, more than the %d the pause note may have", info.Size(), MaxPauseBytes)
			return nil
		}
		b, err := l.readFile(from)
		if err != nil {
			return err
		}
		switch {
		case len(b) > MaxPauseBytes:
			l.is.Add(Position{File: PausedFile}, "write a line saying why the rollout is paused (fleetbot rollout pause --reason ...)",
				"%d bytes, more than the %d the pause note may have", len(b), MaxPauseBytes)
		case !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0:
			l.is.Add(Position{File: PausedFile}, "write a line of text saying why the rollout is paused, or remove the file (fleetbot rollout resume)",
				"not text: the pause note must be UTF-8 text")
		default:
			l.repo.Paused = &Pause{Reason: strings.TrimSpace(string(b))}
		}
	}
	return nil
}

// readFile reads one file of the control repo within the bounds: a file over MaxFileBytes, a
// YAML file whose aliases expand past yamlsize.DefaultMaxNodes, or a repo past MaxFiles or
// MaxTotalBytes is refused (ErrTooLarge, naming the file), before any decoder sees it.
func (l *loader) readFile(name string) ([]byte, error) {
	b, err := l.readBounded(name)
	if err != nil {
		return nil, err
	}
	if err := checkYAMLSize(name, b); err != nil {
		return nil, err
	}
	return b, nil
}

// checkYAMLSize refuses a YAML input with too many nodes (aliases expanded) before it is decoded.
func checkYAMLSize(name string, b []byte) error {
	if isYAMLInput(name) {
		if err := yamlsize.Check(b, yamlsize.DefaultMaxNodes); err != nil {
			return tooLarge(name, err.Error())
		}
	}
	return nil
}

// readBounded reads a file, counting it against the bounds on file size, file count and total
// size.
func (l *loader) readBounded(name string) ([]byte, error) {
	b, err := readAtMost(l.fsys, name, MaxFileBytes)
	if err != nil {
		return nil, err
	}
	l.files++
	l.bytes += len(b)
	switch { // readAtMost refused a file over MaxFileBytes
	case l.files > MaxFiles:
		return nil, tooLarge(name, fmt.Sprintf("the control repo has more than %d files", MaxFiles))
	case l.bytes > MaxTotalBytes:
		return nil, tooLarge(name, fmt.Sprintf("the control repo holds more than %d bytes", MaxTotalBytes))
	}
	return b, nil
}

// readAtMost reads file name of fsys, refusing a file of more than limit bytes before reading
// it (its size as it was opened) or once more was read (a file that grew). One open: a stat
// by name costs an os.Root as much as the read.
func readAtMost(fsys fs.FS, name string, limit int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrUnreadable, name, err)
	}
	defer f.Close()
	size := 0
	if info, err := f.Stat(); err == nil {
		if info.Size() > int64(limit) {
			return nil, tooLarge(name, fmt.Sprintf("%d bytes, more than the %d a file may have", info.Size(), limit))
		}
		size = int(info.Size())
	}
	b := make([]byte, 0, size+1) // +1: the read that finds the end needs no second buffer
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, tooLarge(name, fmt.Sprintf("more than the %d bytes a file may have", limit))
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrUnreadable, name, err)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// ErrTooLarge is returned (wrapped, with the file) for a control repo past its bounds.
var ErrTooLarge = errors.New("control repo input too large")

func tooLarge(name, why string) error {
	return fmt.Errorf("%w: %s: %s; nothing was rendered (split the file, or remove what does not belong in the control repo)", ErrTooLarge, name, why)
}

// isYAMLInput reports the files a YAML decoder (ours or kustomize's) reads.
func isYAMLInput(name string) bool {
	return isYAML(name) || path.Base(name) == "Kustomization"
}

func (l *loader) loadPlatform(top map[string]fs.DirEntry) error {
	e, ok := top[platformFile]
	if !ok {
		hint := "create platform.yaml with the one kind: Platform object (owner, admins, ...)"
		if _, yml := top["platform.yml"]; yml {
			hint = "rename platform.yml to platform.yaml"
		}
		l.is.Add(Position{File: platformFile}, hint, "platform.yaml is missing")
		return nil
	}
	d, err := l.object(platformFile, e, KindPlatform, "")
	if d == nil {
		return err
	}
	var doc platformDoc
	if d.decode(&doc, &l.is) {
		l.repo.Platform = doc.platform(d.src)
		l.platform = Position{File: platformFile, Line: d.src.Line}
	}
	return nil
}

// object reads the one object of file name, which must be a regular file
// holding a kind object placed where that kind belongs (dir, or "" for the
// repo root and app directories). It returns nil when the file could not
// be used: the reason is recorded as an issue, or returned when it is a
// read error.
func (l *loader) object(name string, e fs.DirEntry, kind, dir string) (*document, error) {
	from, ok := l.source(name, e)
	if !ok {
		return nil, nil
	}
	data, err := l.readFile(from)
	if err != nil {
		return nil, err
	}
	l.inputs.add(name, data)
	d := parseDocument(name, data, &l.is)
	if d == nil || !l.placed(d, kind, dir, &l.is) {
		return nil, nil
	}
	return d, nil
}

// source returns the path to read for the file entry e at name: name itself for a regular
// file, the file a symlink resolves to inside the repo (see resolveLink, the one symlink
// policy of every reader). It records an issue and returns false for a refused symlink, a
// directory and any other special file.
func (l *loader) source(name string, e fs.DirEntry) (string, bool) {
	switch {
	case e.Type().IsRegular():
		return name, true
	case e.Type()&fs.ModeSymlink != 0:
		return l.link(name)
	case e.IsDir():
		l.is.Add(Position{File: name}, "", "expected a file, found a directory")
	default:
		l.is.Add(Position{File: name}, "remove it from the control repo", "not a regular file")
	}
	return "", false
}

// link resolves the symlink at name, recording an issue naming it and its target when the
// policy refuses it.
func (l *loader) link(name string) (string, bool) {
	to, lerr := resolveLink(l.fsys, name)
	if lerr != nil {
		l.is.Add(Position{File: name}, lerr.hint, "%s", lerr.msg)
		return "", false
	}
	return to, true
}

// placed checks the kind of a document against its location. It returns
// false when the document holds another fleetbot kind and must be skipped;
// unknown or missing kinds are left to Validate.
func (l *loader) placed(d *document, want, dir string, is *Issues) bool {
	kind, line, _ := d.scalar("kind")
	if kind == want {
		return true
	}
	pos := Position{File: d.file, Line: line}
	switch kind {
	case KindPlatform:
		first := "platform.yaml"
		if l.platform.File != "" {
			first = l.platform.String()
		}
		is.Add(pos, "a control repo has exactly one Platform, in platform.yaml; delete this one or merge it into "+first,
			"a second Platform: only platform.yaml may hold the Platform")
		return false
	case KindCluster, KindWorkspace, KindApp:
		is.Add(pos, "move it to "+kindHome(kind), "a %s does not belong in %s: only %s objects go there", kind, placeName(dir, want), want)
		return false
	}
	return true
}

func kindHome(kind string) string {
	switch kind {
	case KindCluster:
		return "clusters/<name>.yaml"
	case KindWorkspace:
		return "workspaces/<name>.yaml"
	case KindApp:
		return "catalog/<name>/app.yaml"
	}
	return "platform.yaml"
}

func placeName(dir, want string) string {
	if dir == "" {
		return kindHome(want)
	}
	return dir + "/"
}

func isYAML(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// loadObjects loads one Cluster or Workspace per YAML file directly in dir.
func (l *loader) loadObjects(top map[string]fs.DirEntry, dir, kind string) error {
	e, ok := top[dir]
	if !ok {
		return nil
	}
	if !e.IsDir() {
		if e.Type()&fs.ModeSymlink != 0 {
			if _, ok := l.link(dir); !ok {
				return nil
			}
		}
		l.is.Add(Position{File: dir}, "make "+dir+" a directory of one YAML file per "+kind, "expected a directory")
		return nil
	}
	var clusters *clusterDecoder
	if kind == KindCluster {
		clusters = l.decodeClusters()
	}
	err := fs.WalkDir(l.fsys, dir, func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, name, err)
		}
		if e.IsDir() {
			return nil
		}
		if !isYAML(name) {
			if e.Type()&fs.ModeSymlink != 0 {
				l.link(name) // never read, but a link leaving the repo is still reported
			}
			return nil // README.md and friends
		}
		if path.Dir(name) != dir {
			l.is.Add(Position{File: name}, fmt.Sprintf("move it directly into %s/ (nested directories are not read)", dir),
				"%s is not read", name)
			return nil
		}
		if kind == KindCluster {
			return l.readCluster(clusters, name, e, dir)
		}
		d, err := l.object(name, e, kind, dir)
		if d == nil {
			return err
		}
		switch kind {
		case KindWorkspace:
			var w Workspace
			if d.decode(&w, &l.is) {
				w.Source = d.src
				l.repo.Workspaces = append(l.repo.Workspaces, &w)
			}
		}
		return nil
	})
	if clusters != nil {
		return l.mergeClusters(clusters, err)
	}
	return err
}

// clusterFile is one cluster file read by the walk: taken from the cache, or decoded by a
// clusterDecoder worker into cluster, is and err.
type clusterFile struct {
	// name is the file's path, from the file read (the link's target, for a link).
	name, from, dir string
	data            []byte
	cluster         *Cluster
	is              Issues
	err             error
	// fresh is a cluster decoded without a problem, for the cache.
	fresh bool
}

// clusterDecoder decodes the cluster files the walk reads, on as many goroutines as the
// process may run: decoding is most of a load, each file is decoded on its own, and the
// walk's reads (system calls) overlap the decoding. Files are merged in walk order
// afterwards (mergeClusters), so clusters, issues and the first error are those of a load one
// file after another.
type clusterDecoder struct {
	files []*clusterFile
	work  chan *clusterFile
	wg    sync.WaitGroup
}

// clusterDecodeWorkers bounds the decoding goroutines of one load.
func clusterDecodeWorkers() int {
	return max(1, min(runtime.GOMAXPROCS(0), 8))
}

func (l *loader) decodeClusters() *clusterDecoder {
	d := &clusterDecoder{work: make(chan *clusterFile, 64)}
	for range l.workers {
		d.wg.Go(func() {
			for f := range d.work {
				l.decodeCluster(f)
			}
		})
	}
	return d
}

// readCluster reads the cluster file name in dir, counting it against the bounds, and hands it
// to the decoder unless the cache has it.
func (l *loader) readCluster(d *clusterDecoder, name string, e fs.DirEntry, dir string) error {
	from, ok := l.source(name, e)
	if !ok {
		return nil
	}
	data, err := l.readBounded(from)
	if err != nil {
		return err
	}
	l.inputs.add(name, data)
	f := &clusterFile{name: name, from: from, dir: dir, data: data}
	d.files = append(d.files, f)
	if f.cluster = l.cache.cluster(name, data); f.cluster == nil {
		d.work <- f
	}
	return nil
}

// decodeCluster decodes one cluster file into f; it touches nothing else but the cache (safe
// for concurrent use) and what it only reads of l.
func (l *loader) decodeCluster(f *clusterFile) {
	defer func() {
		// A decoder's panic on this goroutine would end the process: the file's error instead,
		// as it would reach the caller of a load on one goroutine.
		if v := recover(); v != nil {
			f.err = fmt.Errorf("%w: %s: decoding failed: %v (a bug in fleetbot: please report it with the file)", ErrUnreadable, f.name, v)
		}
		if l.cache == nil {
			f.data = nil // only the cache needs it: do not hold every file until the merge
		}
	}()
	if f.err = checkYAMLSize(f.from, f.data); f.err != nil {
		return
	}
	doc := parseDocument(f.name, f.data, &f.is)
	if doc == nil || !l.placed(doc, KindCluster, f.dir, &f.is) {
		return
	}
	var c Cluster
	if doc.decode(&c, &f.is) {
		c.Source = doc.src
		f.cluster, f.fresh = &c, len(f.is) == 0
	}
}

// mergeClusters waits for the decoder and adds its clusters and issues in walk order. The
// error is the first of the files decoded before the walk stopped, else the walk's (walkErr).
func (l *loader) mergeClusters(d *clusterDecoder, walkErr error) error {
	close(d.work)
	d.wg.Wait()
	for _, f := range d.files {
		if f.err != nil {
			return f.err
		}
		l.is = append(l.is, f.is...)
		if f.cluster != nil {
			l.repo.Clusters = append(l.repo.Clusters, f.cluster)
		}
		if f.fresh {
			l.cache.put(f.name, f.data, f.cluster)
		}
	}
	return walkErr
}

// loadCatalog loads catalog/<app>/app.yaml and every other file of each app
// directory.
func (l *loader) loadCatalog(top map[string]fs.DirEntry) error {
	e, ok := top[catalogDir]
	if !ok {
		return nil
	}
	if !e.IsDir() {
		l.is.Add(Position{File: catalogDir}, "make catalog a directory of app directories", "expected a directory")
		return nil
	}
	entries, err := fs.ReadDir(l.fsys, catalogDir)
	if err != nil {
		return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, catalogDir, err)
	}
	for _, e := range entries {
		dir := catalogDir + "/" + e.Name()
		if !e.IsDir() {
			if e.Type()&fs.ModeSymlink != 0 {
				l.link(dir) // a file is not an app; a link leaving the repo is still reported
			}
			continue // README.md and friends
		}
		if err := l.loadApp(dir); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) loadApp(dir string) error {
	files := map[string][]byte{}
	var appEntry fs.DirEntry
	err := fs.WalkDir(l.fsys, dir, func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, name, err)
		}
		if e.IsDir() {
			return nil
		}
		rel := strings.TrimPrefix(name, dir+"/")
		if rel == appFile {
			appEntry = e
			return nil
		}
		from, ok := l.source(name, e)
		if !ok {
			return nil
		}
		data, err := l.readFile(from)
		if err != nil {
			return err
		}
		l.inputs.add(name, data)
		files[rel] = data
		return nil
	})
	if err != nil {
		return err
	}
	appPath := dir + "/" + appFile
	if appEntry == nil {
		hint := "add " + appPath + " (kind: App) or remove the directory"
		if _, ok := files["app.yml"]; ok {
			hint = "rename app.yml to app.yaml"
		}
		l.is.Add(Position{File: dir}, hint, "%s has no app.yaml", dir)
		return nil
	}
	d, err := l.object(appPath, appEntry, KindApp, "")
	if d == nil {
		return err
	}
	var a App
	if !d.decode(&a, &l.is) {
		return nil
	}
	a.Source = d.src
	a.Dir = dir
	a.Files = files
	if base := path.Base(dir); a.Metadata.Name != "" && a.Metadata.Name != base {
		l.is.Add(a.Source.At("metadata.name"), fmt.Sprintf("rename the directory to catalog/%s or set metadata.name: %s", a.Metadata.Name, base),
			"app %q lives in %s: the directory must be named after the app", a.Metadata.Name, dir)
	}
	if !hasKustomization(files) {
		l.is.Add(Position{File: dir}, "add "+dir+"/kustomization.yaml listing the app's manifests",
			"app %s has no kustomization.yaml beside app.yaml", path.Base(dir))
	}
	l.repo.Apps = append(l.repo.Apps, &a)
	return nil
}

func hasKustomization(files map[string][]byte) bool {
	for _, k := range kustomizationFiles {
		if _, ok := files[k]; ok {
			return true
		}
	}
	return false
}

// sortRepo orders objects by name (then file) so output is deterministic.
func sortRepo(r *Repo) {
	sort.SliceStable(r.Clusters, func(i, j int) bool {
		return less(r.Clusters[i].Metadata.Name, r.Clusters[i].Source, r.Clusters[j].Metadata.Name, r.Clusters[j].Source)
	})
	sort.SliceStable(r.Workspaces, func(i, j int) bool {
		return less(r.Workspaces[i].Metadata.Name, r.Workspaces[i].Source, r.Workspaces[j].Metadata.Name, r.Workspaces[j].Source)
	})
	sort.SliceStable(r.Apps, func(i, j int) bool {
		return less(r.Apps[i].Metadata.Name, r.Apps[i].Source, r.Apps[j].Metadata.Name, r.Apps[j].Source)
	})
}

func less(a string, as Source, b string, bs Source) bool {
	if a != b {
		return a < b
	}
	return as.File < bs.File
}

// errUnreadable wraps err as ErrUnreadable, saying what was being read.
func errUnreadable(what string, err error) error {
	if errors.Is(err, ErrUnreadable) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreadable, what, err)
}
