package window

import (
	"testing"
	"time"
)

// BenchmarkNeverOpens50 is validate's worst case: the most windows a platform may declare
// (control.MaxWindows), leaving no time, so the whole year is swept.
func BenchmarkNeverOpens50(b *testing.B) {
	var s Schedule
	for i := 0; i < 25; i++ {
		s = append(s, Window{Start: time.Duration(i) * time.Minute, Duration: time.Hour})
		s = append(s, Window{Deny: true, Start: time.Duration(i) * time.Minute, Duration: 2 * time.Hour})
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		if !s.NeverOpens(from) {
			b.Fatal("opens")
		}
	}
}
