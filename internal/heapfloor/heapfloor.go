// Package heapfloor tunes the Go garbage collector of a one-shot command: a heap goal of at
// least a floor while the live heap is small (see Keep).
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is the heap a one-shot command lets grow before it collects garbage (see
// Keep).
const Default = 128 << 20

// Floor keeps the garbage collector's heap goal at floor bytes or more while the live heap
// is small, at most maxGCPercent percent above it: a cold render of a 1,000-cluster fleet
// allocates about 100 MB around a live heap of about 30 MB, and at GOGC=100 the collector,
// starting from a 4 MB heap, ran a dozen cycles and a quarter of the CPU. Once the live heap
// is half the floor or more, the collector works as GOGC=100 (a heap goal of twice the live
// heap): a large fleet uses no more memory than it did. The percent is set after every
// collection, from the live heap it left.
type Floor struct {
	floor uint64

	mu      sync.Mutex
	percent int // the percent set last; 0 before the first
	prev    int // the percent before the floor started, which Stop sets again
	stopped bool
	cycles  int // collections seen
	sample  []metrics.Sample
}

const (
	minGCPercent = 100 // Go's default
	maxGCPercent = 400
)

// Keep starts a Floor of floor bytes for the rest of the process, unless GOGC or
// GOMEMLIMIT is set in the environment (the user's settings win). The commands that run once
// (render, plan, apply, check, the Action) call it from main; serve does not, as its heap
// lives for days. It returns nil when it did not start.
func Keep(floor uint64) *Floor {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	h := &Floor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	h.percent = gcPercentFor(floor, 0)
	h.prev = debug.SetGCPercent(h.percent)
	h.arm()
	return h
}

// Stop ends the floor and sets the percent it found again.
func (h *Floor) Stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	debug.SetGCPercent(h.prev)
}

// gcSentinel is an object nothing references, so every collection frees it and runs its
// cleanup. It holds a pointer: pointer-free objects this small share memory blocks (the tiny
// allocator), and a block is freed only when all its objects are.
type gcSentinel struct{ _ *int }

// arm registers the cleanup that runs after the next collection.
func (h *Floor) arm() {
	runtime.AddCleanup(&gcSentinel{}, (*Floor).afterGC, h)
}

// afterGC sets the percent from the live heap the last collection left and arms the next.
func (h *Floor) afterGC() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.cycles++
	metrics.Read(h.sample)
	live := uint64(0)
	if v := h.sample[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	h.mu.Unlock()
	h.set(gcPercentFor(h.floor, live))
	h.arm()
}

// set sets the percent when it changed (debug.SetGCPercent stops the world briefly).
func (h *Floor) set(percent int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped || percent == h.percent {
		return
	}
	h.percent = percent
	debug.SetGCPercent(percent)
}

// gcPercentFor is the percent that puts the heap goal, live*(1+percent/100), at floor: at least
// minGCPercent, at most maxGCPercent, in steps of 50 so a heap that grows slowly does not
// change it after every collection.
func gcPercentFor(floor, live uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= floor/2 {
		return minGCPercent
	}
	p := int((floor-live)*100/live) / 50 * 50
	return min(max(p, minGCPercent), maxGCPercent)
}
