package status

import (
	"fmt"
	"html"
	"html/template"
	"strings"
)

// Segment is one part of a progress bar: N of the bar's repos, drawn with CSS class Class and
// described by Title.
type Segment struct {
	N     int
	Class string
	Title string
}

// barWidth is the width of a bar's viewBox: segment widths are in percent of the bar.
const barWidth = 100

// BarSVG draws a progress bar as inline SVG, server-side: one rect per non-empty segment, in
// order, its width its share of total (percent of a 100×10 viewBox the page stretches to the
// bar's width), each with a <title> tooltip. label is the accessible name (role img,
// aria-label and <title>), so a screen reader hears every count. Nothing here is markup
// from the caller: label and titles are escaped.
func BarSVG(label string, total int, segs []Segment) template.HTML {
	var b strings.Builder
	esc := html.EscapeString(label)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d 10" preserveAspectRatio="none" role="img" aria-label="%s"><title>%s</title>`,
		barWidth, esc, esc)
	x := 0.0
	for _, s := range segs {
		if s.N <= 0 || total <= 0 {
			continue
		}
		w := barWidth * float64(s.N) / float64(total)
		fmt.Fprintf(&b, `<rect class="%s" x="%.3f" y="0" width="%.3f" height="10"><title>%s</title></rect>`,
			html.EscapeString(s.Class), x, w, html.EscapeString(s.Title))
		x += w
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every caller-supplied string above is escaped
}

// SVG draws the wave's bar (waveSVG).
func (b waveBar) SVG() template.HTML { return waveSVG(&b.Wave) }

// waveSVG draws a wave's bar: its clusters per segment (classes w-healthy, w-done, ...).
func waveSVG(w *Wave) template.HTML {
	segs := make([]Segment, 0, len(Segments))
	for _, seg := range Segments {
		n := w.Count(seg)
		segs = append(segs, Segment{N: n, Class: "w-" + seg, Title: fmt.Sprintf("%d %s", n, seg)})
	}
	return BarSVG(w.Label(), w.Total, segs)
}

// SVG draws the group's bar: its repos per segment, in the classes and colours of the wave
// bars (w-healthy, w-done, ...): a colour means the same in every bar of the page.
func (g *Group) SVG() template.HTML {
	segs := make([]Segment, 0, len(Segments))
	for _, seg := range Segments {
		n := g.Segments[seg]
		segs = append(segs, Segment{N: n, Class: "w-" + seg, Title: fmt.Sprintf("%d %s", n, seg)})
	}
	return BarSVG(fmt.Sprintf("%s: %d of %d in sync", g.Name, g.Done, g.Total), g.Total, segs)
}
