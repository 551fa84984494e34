package status

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// StaticIndex is the fleet page of RenderStatic; StaticRepoDir holds one page per repo.
const (
	StaticIndex   = "index.html"
	StaticRepoDir = "repo"
)

// StaticOptions tune RenderStatic.
type StaticOptions struct {
	// Refresh, when positive, makes each page reload itself that often (status --watch --html
	// rewrites the files meanwhile); zero: a page shows what it was written with.
	Refresh time.Duration
}

// staticName is what a repo's page may be called: a repo name as GitHub allows it, never a
// path ("..", a slash).
var staticName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// RenderStatic renders a view as the status pages serve's /status shows, as files for a
// directory, for a fleet with no service (fleetbot status --html DIR, the local forge
// included): index.html with every row (most urgent first) and StaticRepoDir/NAME.html per
// repo, linked with relative links, with no form, no sort links and no script. The keys are
// slash-separated paths relative to the directory.
func RenderStatic(all *Fleet, o StaticOptions) (map[string][]byte, error) {
	tpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	l := links{Static: true, Home: "../" + StaticIndex, RepoBase: StaticRepoDir + "/", RepoExt: ".html"}
	if o.Refresh > 0 {
		l.Refresh = max(1, int(o.Refresh/time.Second))
		l.RefreshText = o.Refresh.String()
	}
	rows := make([]*Repo, len(all.Repos))
	for i := range all.Repos {
		rows[i] = &all.Repos[i]
	}
	sortRows(rows, "state", false)
	p := listPage{Links: l, Legend: legend, All: all, Fleet: all, Rows: rows, States: States, Segments: Segments,
		WavesDeclared: all.waves.Declared(), Page: 1, Pages: 1, First: 1, Last: len(rows)}
	for _, k := range sortKeys {
		p.Headers = append(p.Headers, header{Label: k, Key: k})
	}
	for _, st := range States {
		if n := all.Summary.States[st]; n > 0 {
			p.Counters = append(p.Counters, counter{State: st, N: n})
		}
	}
	for _, g := range all.Groups {
		p.Bars = append(p.Bars, bar{Group: g})
	}
	for _, wv := range all.Waves {
		p.Waves = append(p.Waves, waveBar{Wave: wv})
	}
	out := map[string][]byte{}
	var buf bytes.Buffer
	if err := tpl.ExecuteTemplate(&buf, "list.html", p); err != nil {
		return nil, fmt.Errorf("status pages: rendering %s: %w", StaticIndex, err)
	}
	out[StaticIndex] = bytes.Clone(buf.Bytes())
	// A repo's page links to its neighbours in the same directory.
	dl := l
	dl.RepoBase = ""
	for _, r := range rows {
		name := r.Short()
		if !staticName.MatchString(name) || strings.Trim(name, ".") == "" {
			return nil, fmt.Errorf("status pages: repo %q cannot name a file", r.Repo)
		}
		buf.Reset()
		if err := tpl.ExecuteTemplate(&buf, "detail.html", newDetailPage(all, r, dl)); err != nil {
			return nil, fmt.Errorf("status pages: rendering the page of %s: %w", r.Repo, err)
		}
		out[StaticRepoDir+"/"+name+".html"] = bytes.Clone(buf.Bytes())
	}
	return out, nil
}
