// Package window evaluates change windows: weekly allow and deny windows, each in its own
// IANA time zone, that say when a rollout may open a pull request or merge one.
//
// It is pure: every answer is a function of the schedule and the instant asked about, so the
// rollout gate, status and validation agree and tests drive it with any clock. A window opens
// on each of its days at its start time on the wall clock of its time zone and lasts its
// duration of elapsed time (so a window across a daylight-saving change is as long as
// declared). A start time the clock skips (a spring-forward gap) opens the window when the
// clock jumps past it; a start time the clock shows twice (a fall-back hour) opens it the
// first time.
package window

import (
	"slices"
	"time"
)

// MaxDuration bounds one window: a week (a longer one would cover itself).
const MaxDuration = 7 * 24 * time.Hour

// Horizon is how far ahead NextOpen and NextClose look: a year covers every daylight-saving
// rule of every time zone once.
const Horizon = 366 * 24 * time.Hour

// Window is one recurring window.
type Window struct {
	// Deny makes it a deny window (a freeze); otherwise it is an allow window.
	Deny bool
	// Days are the weekdays it opens on, by time.Weekday; none set means every day.
	Days [7]bool
	// Start is when it opens, as the time of day on the wall clock of Location (minutes
	// count; below 24h).
	Start time.Duration
	// Duration is how long it stays open, in elapsed time (positive, at most MaxDuration).
	Duration time.Duration
	// Location is the time zone of Start and Days (nil: UTC).
	Location *time.Location
}

// Schedule is a set of windows. A time is open when it is inside an allow window (or the
// schedule has none) and outside every deny window: deny wins.
type Schedule []Window

// interval is one occurrence of a window, [from, to).
type interval struct{ from, to time.Time }

func (iv interval) contains(t time.Time) bool { return !t.Before(iv.from) && t.Before(iv.to) }

// Open reports whether t is open: inside an allow window (or no allow window is declared) and
// inside no deny window.
func (s Schedule) Open(t time.Time) bool {
	allowed, anyAllow := false, false
	for _, w := range s {
		if !w.Deny {
			anyAllow = true
		}
		if !w.covers(t) {
			continue
		}
		if w.Deny {
			return false
		}
		allowed = true
	}
	return allowed || !anyAllow
}

// covers reports whether an occurrence of w contains t.
func (w Window) covers(t time.Time) bool {
	for _, iv := range w.occurrences(t.Add(-w.Duration), t) {
		if iv.contains(t) {
			return true
		}
	}
	return false
}

// NextOpen returns the first instant at or after t that is open (in t's location), and false
// when none comes within Horizon.
func (s Schedule) NextOpen(t time.Time) (time.Time, bool) {
	if s.Open(t) {
		return t, true
	}
	return s.first(t, true)
}

// NextClose returns, for an open t, the first instant after t that is not open (in t's
// location), and false when the schedule stays open through Horizon (or t is not open).
func (s Schedule) NextClose(t time.Time) (time.Time, bool) {
	if !s.Open(t) {
		return time.Time{}, false
	}
	return s.first(t, false)
}

// edge is where an occurrence of a window begins (+1) or ends (-1).
type edge struct {
	at    time.Time
	deny  bool
	delta int
}

// first returns the earliest instant after t, within Horizon, at which Open equals open. It
// sweeps the windows' occurrences once in time order, counting the allow and deny windows
// in force: the open state can only change where an occurrence begins or ends.
func (s Schedule) first(t time.Time, open bool) (time.Time, bool) {
	var edges []edge
	anyAllow := false
	for _, w := range s {
		anyAllow = anyAllow || !w.Deny
		for _, iv := range w.occurrences(t.Add(-w.Duration), t.Add(Horizon)) {
			edges = append(edges, edge{iv.from, w.Deny, 1}, edge{iv.to, w.Deny, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	allows, denies := 0, 0
	horizon := t.Add(Horizon) // past it the occurrences that follow are not counted
	for i := 0; i < len(edges) && !edges[i].at.After(horizon); {
		at := edges[i].at
		for ; i < len(edges) && edges[i].at.Equal(at); i++ { // every edge of one instant
			if edges[i].deny {
				denies += edges[i].delta
			} else {
				allows += edges[i].delta
			}
		}
		if at.After(t) && ((allows > 0 || !anyAllow) && denies == 0) == open {
			return at.In(t.Location()), true
		}
	}
	return time.Time{}, false
}

// NeverOpens reports whether no instant of the year after from is open: the deny windows
// cover every minute the allow windows give.
func (s Schedule) NeverOpens(from time.Time) bool {
	_, ok := s.NextOpen(from)
	return !ok
}

// occurrences lists the occurrences of w that start at or before to and end after from, in
// order.
func (w Window) occurrences(from, to time.Time) []interval {
	loc := w.Location
	if loc == nil {
		loc = time.UTC
	}
	// Start from the local day before from's: an occurrence that began then may still run.
	y, m, d := from.In(loc).Date()
	var out []interval
	for day := d - 1; ; day++ {
		date := time.Date(y, m, day, 12, 0, 0, 0, loc) // noon: never in a gap
		if !w.on(date.Weekday()) {
			if date.After(to) {
				break
			}
			continue
		}
		start := wallClock(date, w.Start, loc)
		if start.After(to) {
			break
		}
		if iv := (interval{start, start.Add(w.Duration)}); iv.to.After(from) {
			out = append(out, iv)
		}
	}
	return out
}

// on reports whether w opens on weekday d.
func (w Window) on(d time.Weekday) bool {
	return w.Days == [7]bool{} || w.Days[d]
}

// wallClock returns the first instant at which the clock of loc shows the time of day tod on
// the local date of date; for a time the clock skips, the instant it jumps past it.
func wallClock(date time.Time, tod time.Duration, loc *time.Location) time.Time {
	y, m, d := date.Date()
	naive := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(tod)
	// The offsets in effect around that day: the time of day is naive minus one of them.
	_, before := naive.Add(-36 * time.Hour).In(loc).Zone()
	_, after := naive.Add(36 * time.Hour).In(loc).Zone()
	var best time.Time
	for _, off := range []int{before, after} {
		u := naive.Add(-time.Duration(off) * time.Second)
		if wall(u.In(loc)).Equal(naive) && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	if !best.IsZero() {
		return best
	}
	// A gap: with the offset before it the instant lands after the jump, in the zone the
	// jump starts; the window opens at that jump.
	start, _ := naive.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start
}

// wall is t's wall-clock reading as a UTC time, for comparing readings.
func wall(t time.Time) time.Time {
	y, m, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, m, d, h, mi, s, t.Nanosecond(), time.UTC)
}
