package jobqueue

import "time"

// Clock is the queue's time: when a held job is due (Config.BatchDelay, Queue.RetryAt). Tests
// inject a fake one.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed; stop cancels it (false when
	// f already ran or was stopped).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// WallClock is the real time.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (WallClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
