// Package browsertest drives headless Chromium for the tests of fleetbot's status pages, as
// net/http/httptest drives a server: it finds the browser, loads a page at several viewport
// widths in one browser run (a phone's 420 px, a desktop's 1,400 px) and returns, per width,
// whether anything overflows sideways and the DOM as Chromium built it. The pages carry no
// script; only the copy the harness loads gets the measuring one.
package browsertest

import (
	"context"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The widths the status pages are checked at: a desktop browser and a phone.
const (
	Wide   = 1400
	Narrow = 420
)

// Chromium returns the headless browser: Debian's chromium (or $FLEETBOT_CHROMIUM). Missing, it
// fails the test under CI and skips it elsewhere.
func Chromium(t testing.TB) string {
	t.Helper()
	name := os.Getenv("FLEETBOT_CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("headless chromium is required under CI (apt-get install -y chromium): %v", err)
		}
		t.Skipf("headless chromium not installed (apt-get install -y chromium): %v", err)
	}
	return path
}

// Browse runs headless chromium on target with extra flags (--dump-dom, --screenshot=FILE,
// --window-size=W,H) and returns its stdout.
func Browse(t testing.TB, bin, target string, extra ...string) string {
	t.Helper()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, target)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chromium %v: %s", extra, stderr.String())
	return string(out)
}

// View is a page as Chromium laid it out in a viewport Width px wide: the document's width
// (Scroll), the viewport's (Inner), and the DOM.
type View struct {
	Width, Scroll, Inner int
	DOM                  string
}

// Overflows reports whether the document is wider than its viewport.
func (v View) Overflows() bool { return v.Scroll > v.Inner }

var cspMeta = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy"[^>]*>`)

// measureScript records, on the harness around the frame, the frame's document width, its
// viewport width and its DOM, under names of the frame's width.
const measureScript = `<script>(function(){var w=window.innerWidth,b=parent.document.body;` +
	`b.setAttribute("data-scroll-"+w,document.documentElement.scrollWidth);b.setAttribute("data-inner-"+w,w);` +
	`b.setAttribute("data-dom-"+w,document.documentElement.outerHTML);})()</script>`

// harness shows page in one iframe per width: headless chromium's windows are at least 500 px
// wide, an iframe is the viewport a phone's would be (its media queries see its width). srcdoc
// gives the frames the harness's origin, so their script may write on it.
func harness(page string, widths []int) string {
	inner := cspMeta.ReplaceAllString(page, "")
	inner = strings.Replace(inner, "</body>", measureScript+"</body>", 1)
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style></head><body>`)
	for _, w := range widths {
		b.WriteString(`<iframe width="` + strconv.Itoa(w) + `" height="900" srcdoc="` + html.EscapeString(inner) + `"></iframe>`)
	}
	b.WriteString(`</body></html>`)
	return b.String()
}

// Load lays page out at each width in one chromium run and returns a View per width, in order.
func Load(t testing.TB, bin, page string, widths ...int) []View {
	t.Helper()
	file := filepath.Join(t.TempDir(), "harness.html")
	require.NoError(t, os.WriteFile(file, []byte(harness(page, widths)), 0o644))
	widest := 500
	for _, w := range widths {
		widest = max(widest, w)
	}
	dump := Browse(t, bin, "file://"+file, "--dump-dom", "--window-size="+strconv.Itoa(widest+40)+","+strconv.Itoa(900*len(widths)+100))
	out := make([]View, 0, len(widths))
	for _, w := range widths {
		v := View{Width: w}
		for name, dst := range map[string]*int{"scroll": &v.Scroll, "inner": &v.Inner} {
			m := regexp.MustCompile(`data-` + name + `-` + strconv.Itoa(w) + `="(\d+)"`).FindStringSubmatch(dump)
			require.NotNil(t, m, "the frame %d px wide measured itself: %.300s", w, dump)
			*dst, _ = strconv.Atoi(m[1])
		}
		m := regexp.MustCompile(`data-dom-` + strconv.Itoa(w) + `="([^"]*)"`).FindStringSubmatch(dump)
		require.NotNil(t, m, "the frame %d px wide recorded its DOM", w)
		v.DOM = html.UnescapeString(m[1])
		out = append(out, v)
	}
	return out
}

// Fits loads page at the wide and the narrow width and fails the test when the viewport is not
// the width asked or the document is wider than it; it returns the DOM at the wide width.
func Fits(t testing.TB, bin, name, page string) string {
	t.Helper()
	views := Load(t, bin, page, Wide, Narrow)
	for _, v := range views {
		if v.Inner != v.Width {
			t.Errorf("%s: the viewport is %d px, want %d", name, v.Inner, v.Width)
		}
		if v.Overflows() {
			t.Errorf("%s at %d px: the document is %d px wide, wider than the viewport", name, v.Width, v.Scroll)
		}
	}
	return views[0].DOM
}
