package status

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"strconv"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// DefaultPageSize is how many rows one page of /status shows.
const DefaultPageSize = 200

// maxQueryLen bounds every query parameter the pages read.
const maxQueryLen = 256

//go:embed templates/*.html
var templateFS embed.FS

// HandlerConfig configures the status pages.
type HandlerConfig struct {
	// Input returns what the view is built from. It is called once per page view and must
	// not call the forge (serve: the results of its own last applies).
	Input func() Input
	// GroupBy groups the progress picture (default ByKind).
	GroupBy Grouper
	// PageSize is how many rows a page shows (default DefaultPageSize).
	PageSize int
	// Token is the bearer token every request must carry. Empty, the handler refuses to
	// start unless InsecureNoAuth is set (access is then left to an authenticating proxy in
	// front).
	Token          []byte
	InsecureNoAuth bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Handler serves GET /status (summary, progress picture, sortable and filterable table, one
// page of rows at a time) and GET /status/repo/{name} (one repo and its last report).
type Handler struct {
	cfg   HandlerConfig
	waves rollout.ViewCache
	mux   *http.ServeMux
	tpl   *template.Template
	token [sha256.Size]byte
}

// NewHandler returns the status pages, or an error when access is not configured.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Input == nil {
		return nil, errors.New("status pages: no input")
	}
	if len(cfg.Token) == 0 && !cfg.InsecureNoAuth {
		return nil, errors.New("status pages: a bearer token is required (--status-token-file), or --status-insecure-no-auth when an authenticating proxy guards /status")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.GroupBy.Of == nil {
		cfg.GroupBy = ByKind()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, tpl: tpl, mux: http.NewServeMux()}
	if len(cfg.Token) > 0 {
		h.token = sha256.Sum256(cfg.Token)
	}
	h.mux.HandleFunc("GET /status", h.list)
	h.mux.HandleFunc("GET /status/{$}", h.list)
	h.mux.HandleFunc("GET /status/repo/{name}", h.detail)
	return h, nil
}

// parseTemplates parses the pages' templates with their helper functions.
func parseTemplates() (*template.Template, error) {
	tpl, err := template.New("").Funcs(template.FuncMap{
		"short":    report.ShortSHA,
		"few":      few,
		"repoName": repoName,
		"words":    func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", " ")) },
		"labels":   func(l map[string]string) string { return strings.ReplaceAll(LabelsString(l), ",", ", ") },
		"weblink": func(s string) string {
			if strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") {
				return s
			}
			return ""
		},
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("status pages: parsing templates: %w", err)
	}
	return tpl, nil
}

// links are how a page links to the others: served (/status, /status/repo/NAME) or as static
// files (index.html, repo/NAME.html), and whether and how often it reloads itself.
type links struct {
	// Static: files with relative links, no filter form, no sort links, no pager.
	Static bool
	// Home is the fleet page; a repo's page is RepoBase + name + RepoExt.
	Home, RepoBase, RepoExt string
	// Refresh is the reload interval in seconds (0: none); RefreshText says it in words.
	Refresh     int
	RefreshText string
}

// servedRefresh is how often a served page reloads itself.
const servedRefresh = time.Minute

func servedLinks() links {
	return links{Home: "/status", RepoBase: "/status/repo/", Refresh: int(servedRefresh / time.Second), RefreshText: "minute"}
}

// legendEntry says what one colour means.
type legendEntry struct{ Segment, Means string }

// legend is the one legend of the page: every bar's segments, every badge's colour.
var legend = []legendEntry{
	{SegHealthy, "in sync, Flux reports it healthy"},
	{SegDone, "in sync, no Flux verdict (or archived)"},
	{SegOpen, "waits in fleetbot's pull request"},
	{SegPending, "not written yet: the next apply, the write budget or its wave's turn"},
	{SegHalted, "needs a human: Flux fails it, a human edited the bot branch, or it failed"},
}

// ServeHTTP checks the bearer token (in constant time), then serves the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.cfg.InsecureNoAuth || len(h.cfg.Token) > 0 {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="fleetbot status"`)
			http.Error(w, "fleetbot status: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	h.mux.ServeHTTP(w, r)
}

// sortKeys are the table's sortable columns.
var sortKeys = []string{"repo", "kind", "group", "state", "revision", "pr", "age", "waiting", "merged", "health"}

// listPage is the model of /status.
type listPage struct {
	Links  links
	Legend []legendEntry
	Fleet  *Fleet // filtered
	All    *Fleet
	Rows   []*Repo
	Bars   []bar
	Waves  []waveBar
	// WavesDeclared: the bars are declared waves (otherwise one AllClusters bar).
	WavesDeclared bool
	Segments      []string
	Headers       []header
	States        []State
	Groups        []string
	WaveList      []string
	Q             query
	Error         string
	Page          int
	Pages         int
	First         int
	Last          int
	PrevURL       string
	NextURL       string
	Counters      []counter
}

type query struct {
	Sort, Selector, State, Group, Wave, Text string
	Desc                                     bool
	Page                                     int
}

type header struct {
	Label, Key, URL string
	Active, Desc    bool
}

type counter struct {
	State State
	N     int
	URL   string
}

// bar is one group's progress bar and the page of its rows.
type bar struct {
	Group
	URL string
}

// waveBar is one rollout wave's bar and the page of its clusters.
type waveBar struct {
	Wave
	URL string
}

func param(r *http.Request, name string) string {
	v := r.URL.Query().Get(name)
	if len(v) > maxQueryLen {
		v = v[:maxQueryLen]
	}
	return v
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := query{Sort: param(r, "sort"), Selector: param(r, "selector"), State: param(r, "state"), Group: param(r, "group"),
		Wave: param(r, "wave"), Text: param(r, "q"), Desc: param(r, "desc") == "1"}
	if !slices.Contains(sortKeys, q.Sort) {
		q.Sort = "state"
	}
	q.Page, _ = strconv.Atoi(param(r, "page"))
	all := Build(h.input(), Options{GroupBy: h.cfg.GroupBy, waves: &h.waves})
	p := listPage{Links: servedLinks(), Legend: legend, All: all, States: States, Segments: Segments, Q: q, WavesDeclared: all.waves.Declared()}
	fl := Filter{Group: q.Group, Wave: q.Wave, Text: q.Text}
	if q.State != "" {
		if slices.Contains(States, State(q.State)) {
			fl.States = []State{State(q.State)}
		} else {
			p.Error = fmt.Sprintf("unknown state %q", q.State)
		}
	}
	if sel, err := ParseSelector(q.Selector); err != nil {
		p.Error = err.Error()
	} else {
		fl.Selector = sel
	}
	p.Fleet = all.Filtered(fl)
	for _, g := range all.Groups {
		p.Groups = append(p.Groups, g.Name)
	}
	for _, wv := range all.Waves {
		p.WaveList = append(p.WaveList, wv.Name)
	}
	if q.Wave != "" && !slices.Contains(p.WaveList, q.Wave) {
		p.Error = fmt.Sprintf("unknown wave %q (the waves: %s)", q.Wave, strings.Join(p.WaveList, ", "))
	}
	// Sort pointers, not rows: a row is a few hundred bytes, and 10,000 of them are moved
	// around on every request otherwise.
	rows := make([]*Repo, len(p.Fleet.Repos))
	for i := range p.Fleet.Repos {
		rows[i] = &p.Fleet.Repos[i]
	}
	sortRows(rows, q.Sort, q.Desc)
	size := h.cfg.PageSize
	p.Pages = max(1, (len(rows)+size-1)/size)
	p.Page = min(max(q.Page, 1), p.Pages)
	start := (p.Page - 1) * size
	end := min(start+size, len(rows))
	p.Rows = rows[start:end]
	p.First, p.Last = start+1, end
	if p.Page > 1 {
		p.PrevURL = q.with("page", strconv.Itoa(p.Page-1))
	}
	if p.Page < p.Pages {
		p.NextURL = q.with("page", strconv.Itoa(p.Page+1))
	}
	for _, k := range sortKeys {
		hd := header{Label: k, Key: k, Active: k == q.Sort, Desc: q.Desc}
		desc := "0"
		if hd.Active && !q.Desc {
			desc = "1"
		}
		hd.URL = q.with("sort", k, "desc", desc, "page", "")
		p.Headers = append(p.Headers, hd)
	}
	for _, st := range States {
		if n := all.Summary.States[st]; n > 0 {
			p.Counters = append(p.Counters, counter{State: st, N: n, URL: q.with("state", string(st), "page", "")})
		}
	}
	for _, g := range p.Fleet.Groups {
		p.Bars = append(p.Bars, bar{Group: g, URL: q.with("group", g.Name, "page", "")})
	}
	for _, wv := range p.Fleet.Waves {
		p.Waves = append(p.Waves, waveBar{Wave: wv, URL: q.with("wave", wv.Name, "page", "")})
	}
	if p.Error != "" {
		w.WriteHeader(http.StatusBadRequest)
	}
	h.render(w, "list.html", p)
}

// with returns the page URL of q with some parameters replaced ("" removes one).
func (q query) with(kv ...string) string {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("sort", q.Sort)
	if q.Desc {
		v.Set("desc", "1")
	}
	set("selector", q.Selector)
	set("state", q.State)
	set("group", q.Group)
	set("wave", q.Wave)
	set("q", q.Text)
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" || (kv[i] == "desc" && kv[i+1] == "0") {
			v.Del(kv[i])
			continue
		}
		v.Set(kv[i], kv[i+1])
	}
	if len(v) == 0 {
		return "/status"
	}
	return "/status?" + v.Encode()
}

// sortRows sorts by one column, then by repo.
func sortRows(rows []*Repo, key string, desc bool) {
	rank := map[State]int{}
	for i, s := range States {
		rank[s] = i
	}
	cmp := func(a, b *Repo) int {
		switch key {
		case "repo":
			return strings.Compare(a.Repo, b.Repo)
		case "kind":
			return strings.Compare(a.Kind, b.Kind)
		case "group":
			return strings.Compare(a.Group, b.Group)
		case "state":
			return rank[a.State] - rank[b.State]
		case "pr":
			return prNumber(a) - prNumber(b)
		case "age":
			return int(prAge(a) - prAge(b))
		case "waiting":
			return strings.Compare(a.WaitingOn, b.WaitingOn)
		case "revision":
			return strings.Compare(a.Revision, b.Revision)
		case "merged":
			return strings.Compare(a.Merged, b.Merged)
		case "health":
			return strings.Compare(a.Health, b.Health)
		}
		return 0
	}
	slices.SortStableFunc(rows, func(a, b *Repo) int {
		c := cmp(a, b)
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		return strings.Compare(a.Repo, b.Repo)
	})
}

func prNumber(r *Repo) int {
	if r.PR == nil {
		return 0
	}
	return r.PR.Number
}

func prAge(r *Repo) int64 {
	if r.PR == nil {
		return -1
	}
	return r.PR.AgeSeconds
}

// detailPage is the model of /status/repo/{name}.
type detailPage struct {
	Links   links
	Fleet   *Fleet
	Repo    *Repo
	Files   int
	Objects []objectRow
	Access  []string
	Owners  []string
}

type objectRow struct {
	Kind                    string
	Added, Changed, Removed int
}

func (h *Handler) detail(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f := Build(h.input(), Options{GroupBy: h.cfg.GroupBy, waves: &h.waves})
	row := f.Find(name)
	if row == nil || len(name) > maxQueryLen {
		http.Error(w, "fleetbot status: no target repo of that name", http.StatusNotFound)
		return
	}
	h.render(w, "detail.html", newDetailPage(f, row, servedLinks()))
}

// newDetailPage is the model of one repo's page.
func newDetailPage(f *Fleet, row *Repo, l links) detailPage {
	p := detailPage{Links: l, Fleet: f, Repo: row}
	if res := row.Result(); res != nil {
		p.Files = len(res.Files)
		for _, k := range slices.Sorted(maps.Keys(res.Objects)) {
			c := res.Objects[k]
			p.Objects = append(p.Objects, objectRow{Kind: k, Added: c.Added, Changed: c.Changed, Removed: c.Removed})
		}
		if res.Access != nil {
			p.Access = append(p.Access, res.Access.Drift...)
			if res.Access.Refused != "" {
				p.Access = append(p.Access, "REFUSED: "+res.Access.Refused)
			}
		}
		for _, e := range res.CodeownersErrors {
			p.Owners = append(p.Owners, e.String())
		}
	}
	return p
}

func (h *Handler) input() Input {
	in := h.cfg.Input()
	if in.Now.IsZero() {
		in.Now = h.cfg.Now()
	}
	return in
}

// render executes a template into a buffer first, so a failure is a clean 500.
func (h *Handler) render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := h.tpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "fleetbot status: rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// maxListed is how many provisioned clusters a row of /status names (the detail page names all).
const maxListed = 5

// few names at most maxListed items: "a, b, c, d, e and 12 more".
func few(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}
