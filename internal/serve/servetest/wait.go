package servetest

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"
)

// Signal is a broadcast of "something changed": Notify closes the channel every C before it
// returned. It holds no timer and starts no goroutine.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits
}

// C returns the channel the next Notify closes.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes everyone waiting on a channel C returned.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Handler returns a slog.Handler that passes each record to next (nil: to no one) and then
// notifies s: a test waiting on s re-checks after everything serve logs. It takes every record
// from Info up whatever next takes: serve logs a webhook delivery once it is counted in the
// metrics, and a finished job once it is counted.
func (s *Signal) Handler(next slog.Handler) slog.Handler {
	if next == nil {
		next = slog.DiscardHandler
	}
	return &logSignal{s: s, next: next}
}

type logSignal struct {
	s    *Signal
	next slog.Handler
}

func (h *logSignal) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *logSignal) Handle(ctx context.Context, r slog.Record) error {
	defer h.s.Notify()
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *logSignal) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSignal{s: h.s, next: h.next.WithAttrs(as)}
}

func (h *logSignal) WithGroup(name string) slog.Handler {
	return &logSignal{s: h.s, next: h.next.WithGroup(name)}
}

// Writer returns an io.Writer that writes to next and then notifies s: a test waiting on s
// re-checks after each line a serve process logs.
func (s *Signal) Writer(next io.Writer) io.Writer { return &writeSignal{s: s, next: next} }

type writeSignal struct {
	s    *Signal
	next io.Writer
}

func (w *writeSignal) Write(p []byte) (int, error) {
	defer w.s.Notify()
	return w.next.Write(p)
}

// Waiter waits for conditions on the events that may change them: each of its wakes returns
// the channel the next such event closes (githubtest.Server.Changed, Signal.C).
type Waiter struct {
	t     testing.TB
	wakes []func() <-chan struct{}
}

// NewWaiter returns a Waiter of t woken by wakes.
func NewWaiter(t testing.TB, wakes ...func() <-chan struct{}) *Waiter {
	return &Waiter{t: t, wakes: wakes}
}

// Eventually returns once cond holds, checking it now and again after each event of the
// Waiter's wakes (taken before each check, so none is missed between a check and the wait). A
// condition still false near the test's deadline (go test -timeout) fails the test naming what.
func (w *Waiter) Eventually(what string, cond func() bool) {
	w.t.Helper()
	cases := make([]reflect.SelectCase, len(w.wakes)+1)
	for i := range cases {
		cases[i].Dir = reflect.SelectRecv
	}
	if at, ok := hangAt(w.t); ok {
		hang := time.NewTimer(time.Until(at))
		defer hang.Stop()
		cases[len(w.wakes)].Chan = reflect.ValueOf(hang.C)
	}
	for {
		for i, wake := range w.wakes {
			cases[i].Chan = reflect.ValueOf(wake())
		}
		if cond() {
			return
		}
		if chosen, _, _ := reflect.Select(cases); chosen == len(w.wakes) {
			w.t.Fatalf("waiting for %s: still not true near the test's deadline (re-checked on every change that could make it so)", what)
		}
	}
}

// hangAt is when a wait of t gives up: shortly before go test's -timeout would panic, so that
// the failure names the condition; false without a deadline.
func hangAt(t testing.TB) (time.Time, bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	at, ok := d.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return at.Add(-min(time.Until(at)/10, 30*time.Second)), true
}
