package window

import (
	"testing"
	"time"
	_ "time/tzdata" // the same zone rules on every machine

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func days(ds ...time.Weekday) [7]bool {
	var out [7]bool
	for _, d := range ds {
		out[d] = true
	}
	return out
}

var weekdays = days(time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestOpen: allow windows open the schedule on their days, deny windows close it and win over
// allow windows, and with no allow window every time outside the deny windows is open.
func TestOpen(t *testing.T) {
	office := Window{Days: weekdays, Start: 9 * time.Hour, Duration: 8 * time.Hour}
	friday := Window{Deny: true, Days: days(time.Friday), Start: 12 * time.Hour, Duration: 12 * time.Hour}
	night := Window{Start: 22 * time.Hour, Duration: 4 * time.Hour, Days: days(time.Saturday)}
	for name, tc := range map[string]struct {
		s    Schedule
		at   string
		open bool
	}{
		"no windows: always open":          {nil, "2026-11-25T03:00:00Z", true},
		"inside an allow window":           {Schedule{office}, "2026-11-25T09:00:00Z", true},
		"its end is outside":               {Schedule{office}, "2026-11-25T17:00:00Z", false},
		"before it opens":                  {Schedule{office}, "2026-11-25T08:59:00Z", false},
		"a day it does not open on":        {Schedule{office}, "2026-11-28T10:00:00Z", false},
		"deny wins inside allow":           {Schedule{office, friday}, "2026-11-27T13:00:00Z", false},
		"allow before the deny starts":     {Schedule{office, friday}, "2026-11-27T11:59:00Z", true},
		"only deny: open outside it":       {Schedule{friday}, "2026-11-26T13:00:00Z", true},
		"only deny: closed inside it":      {Schedule{friday}, "2026-11-27T23:59:00Z", false},
		"a window past midnight runs on":   {Schedule{night}, "2026-11-29T01:30:00Z", true},
		"and ends after its duration":      {Schedule{night}, "2026-11-29T02:00:00Z", false},
		"it opens on its start day only":   {Schedule{night}, "2026-11-28T01:30:00Z", false},
		"a week-long window covers a week": {Schedule{{Days: days(time.Monday), Duration: MaxDuration}}, "2026-11-29T23:59:00Z", true},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.open, tc.s.Open(utc(tc.at)))
		})
	}
}

// TestNextOpenAndClose: the next opening after a closed time, across a weekend and a deny
// window, and the closing of an open time.
func TestNextOpenAndClose(t *testing.T) {
	office := Window{Days: weekdays, Start: 9 * time.Hour, Duration: 8 * time.Hour}
	freeze := Window{Deny: true, Days: days(time.Monday), Start: 0, Duration: 12 * time.Hour}
	s := Schedule{office, freeze}

	// Friday evening: the next opening is Monday, after the Monday-morning freeze.
	next, ok := s.NextOpen(utc("2026-11-27T18:00:00Z"))
	require.True(t, ok)
	assert.Equal(t, utc("2026-11-30T12:00:00Z"), next)
	end, ok := s.NextClose(next)
	require.True(t, ok)
	assert.Equal(t, utc("2026-11-30T17:00:00Z"), end)

	// Already open: NextOpen is now.
	now := utc("2026-11-25T10:00:00Z")
	next, ok = s.NextOpen(now)
	require.True(t, ok)
	assert.Equal(t, now, next)

	// Closed: no closing time.
	_, ok = s.NextClose(utc("2026-11-25T20:00:00Z"))
	assert.False(t, ok)

	// No windows: open and never closing.
	_, ok = Schedule(nil).NextClose(now)
	assert.False(t, ok)
}

// TestDaylightSaving: a start the clock skips opens the window when the clock jumps past it,
// a start the clock shows twice opens it the first time, and a window lasts its duration of
// elapsed time across a change.
func TestDaylightSaving(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	at230 := Window{Start: 2*time.Hour + 30*time.Minute, Duration: time.Hour, Location: berlin}
	s := Schedule{at230}

	// 2026-03-29: Berlin's clocks jump from 02:00 CET (01:00Z) to 03:00 CEST.
	next, ok := s.NextOpen(utc("2026-03-28T23:00:00Z"))
	require.True(t, ok)
	assert.Equal(t, utc("2026-03-29T01:00:00Z"), next, "opens at the jump (03:00 CEST)")
	end, _ := s.NextClose(next)
	assert.Equal(t, utc("2026-03-29T02:00:00Z"), end, "one hour later")

	// 2026-10-25: 03:00 CEST (01:00Z) falls back to 02:00 CET; 02:30 happens at 00:30Z and 01:30Z.
	next, ok = s.NextOpen(utc("2026-10-24T23:00:00Z"))
	require.True(t, ok)
	assert.Equal(t, utc("2026-10-25T00:30:00Z"), next, "opens the first time the clock shows 02:30")
	assert.False(t, s.Open(utc("2026-10-25T01:30:00Z")), "and not again an hour later")

	// An ordinary day: 02:30 CET is 01:30Z in winter, 00:30Z in summer.
	assert.True(t, s.Open(utc("2026-01-15T01:30:00Z")))
	assert.True(t, s.Open(utc("2026-07-15T00:30:00Z")))

	// A 24h window from local midnight on the day of the jump ends 24 elapsed hours later,
	// at 01:00 local on the next day.
	day := Schedule{{Days: days(time.Sunday), Duration: 24 * time.Hour, Location: berlin}}
	assert.True(t, day.Open(utc("2026-03-29T21:59:00Z")))
	assert.False(t, day.Open(utc("2026-03-29T23:00:00Z")))
	assert.True(t, day.Open(utc("2026-03-28T23:00:00Z")), "opens at 00:00 CET")
}

// TestTimeZones: windows of different zones combine on absolute time: an allow window in New
// York and a deny window in Tokyo.
func TestTimeZones(t *testing.T) {
	ny := zone(t, "America/New_York")
	tokyo := zone(t, "Asia/Tokyo")
	allow := Window{Days: weekdays, Start: 9 * time.Hour, Duration: 8 * time.Hour, Location: ny}
	// Tokyo's Thursday 00:00-02:00 is New York's Wednesday 10:00-12:00 (EST, UTC-5).
	deny := Window{Deny: true, Days: days(time.Thursday), Duration: 2 * time.Hour, Location: tokyo}
	s := Schedule{allow, deny}
	assert.True(t, s.Open(utc("2026-11-25T14:30:00Z")), "09:30 in New York")
	assert.False(t, s.Open(utc("2026-11-25T15:30:00Z")), "10:30 in New York: Thursday 00:30 in Tokyo")
	next, ok := s.NextOpen(utc("2026-11-25T15:30:00Z"))
	require.True(t, ok)
	assert.Equal(t, utc("2026-11-25T17:00:00Z"), next, "when Tokyo's freeze ends")
	// A day of the week is the window's zone's: 09:00 Monday in New York is Monday 14:00Z.
	assert.True(t, s.Open(utc("2026-11-30T14:00:00Z")))
	assert.False(t, s.Open(utc("2026-11-30T13:59:00Z")))
	// New York's DST change moves the window in UTC: 09:00 EDT is 13:00Z.
	assert.True(t, s.Open(utc("2026-07-06T13:00:00Z")))
}

// TestNeverOpens: deny windows that cover every minute the allow windows give leave no time
// to roll out, in one zone or across two.
func TestNeverOpens(t *testing.T) {
	from := utc("2026-01-01T00:00:00Z")
	office := Window{Days: weekdays, Start: 9 * time.Hour, Duration: 8 * time.Hour}
	for name, tc := range map[string]struct {
		s     Schedule
		never bool
	}{
		"no windows":                 {nil, false},
		"an allow window":            {Schedule{office}, false},
		"a deny window every day":    {Schedule{office, {Deny: true, Duration: 24 * time.Hour}}, true},
		"a deny window on weekdays":  {Schedule{office, {Deny: true, Days: weekdays, Start: 8 * time.Hour, Duration: 10 * time.Hour}}, true},
		"a deny window ending early": {Schedule{office, {Deny: true, Days: weekdays, Start: 8 * time.Hour, Duration: 8*time.Hour + 59*time.Minute}}, false},
		"only a week-long deny":      {Schedule{{Deny: true, Days: days(time.Monday), Duration: MaxDuration}}, true},
		"a deny of another zone": {Schedule{office, {Deny: true, Days: weekdays, Start: 8 * time.Hour, Duration: 10 * time.Hour,
			Location: zone(t, "Asia/Tokyo")}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.never, tc.s.NeverOpens(from))
		})
	}
}
