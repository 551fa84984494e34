package pr

import (
	"testing"
)

// FuzzMarker: findMarker, which every plan uses to read the state fleetbot keeps in a pull
// request body (a body anyone with write access may edit), finds exactly what the marker's
// regular expression finds, and replacing the marker keeps the rest of the body.
func FuzzMarker(f *testing.F) {
	m := marker{Head: "abc", Source: "def", Waves: []string{"eu"}}
	for _, seed := range []string{
		"",
		"no marker",
		"body\n\n" + m.String() + "\n",
		"<!-- fleetbot:state {} -->",
		"<!-- fleetbot:state {\"head\":\"a\"} --> <!-- fleetbot:state {\"head\":\"b\"} -->",
		"<!-- fleetbot:state {\n} --> <!-- fleetbot:state {\"x\":1} -->",
		"<!-- fleetbot:state <!-- fleetbot:state {\"a\":\"} -->\"} -->",
		"<!-- fleetbot:state {\"a\":\"}\"} -->",
		"<!-- fleetbot:state {} --",
		"<!-- fleetbot:state {\"head\":\"a\"}\n -->",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		want := markerRE.FindStringSubmatchIndex(body)
		start, jsonEnd, end, ok := findMarker(body)
		if ok != (want != nil) {
			t.Fatalf("findMarker(%q) found %v, the regular expression %v", body, ok, want)
		}
		if !ok {
			return
		}
		if start != want[0] || end != want[1] || start+len(markerPrefix) != want[2] || jsonEnd != want[3] {
			t.Fatalf("findMarker(%q) = %d, %d, %d; the regular expression %v", body, start, jsonEnd, end, want)
		}
		out := withMarker(body, m)
		if out != body[:start]+m.String()+body[end:] {
			t.Fatalf("withMarker(%q) = %q", body, out)
		}
	})
}
