package heapfloor

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGCPercentFor(t *testing.T) {
	t.Parallel()
	const floor = 128 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},          // before the first collection
		{4 << 20, 400},    // a small heap: at most five times the live heap
		{30 << 20, 300},   // a 1,000-cluster render: a goal of about 128 MiB, in steps of 50
		{50 << 20, 150},   //
		{64 << 20, 100},   // half the floor: Go's default from here on
		{300 << 20, 100},  // a 10,000-cluster render: no more memory than GOGC=100
		{1 << 40, 100},    //
		{floor - 1, 100},  //
		{floor / 3, 200},  // (128-42.7)/42.7 = 2.0
		{floor / 10, 400}, // 900 % capped
	} {
		assert.Equal(t, c.want, gcPercentFor(floor, c.live), "live %d MiB", c.live>>20)
	}
}

// gcPercent reads the collector's percent (setting it back).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestHeapFloorFollowsTheLiveHeap: started, the floor raises the percent, sets it again after
// every collection from the live heap, and Stop gives Go's default back. The collector is
// process-wide: this test is not parallel.
func TestHeapFloorFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	h := Keep(Default)
	require.NotNil(t, h)
	defer h.Stop()
	assert.Equal(t, 400, gcPercent(), "a fresh process's heap is small")

	// A live heap of three quarters of the floor: Go's default after the next collection.
	ballast := make([][]byte, 96)
	for i := range ballast {
		ballast[i] = make([]byte, 1<<20)
	}
	for seen := 0; ; {
		runtime.GC()
		h.mu.Lock()
		cycles, percent := h.cycles, h.percent
		h.mu.Unlock()
		if cycles > seen && percent == 100 {
			break // the cleanup runs on its own goroutine, after the collection
		}
		seen = cycles
		runtime.Gosched()
	}
	assert.Equal(t, 100, gcPercent())
	runtime.KeepAlive(ballast)

	h.Stop()
	assert.Equal(t, 100, gcPercent())
}

func TestHeapFloorLeavesTheUsersSettings(t *testing.T) {
	t.Setenv("GOGC", "50")
	before := gcPercent()
	assert.Nil(t, Keep(Default), "GOGC is set")
	assert.Equal(t, before, gcPercent())
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	assert.Nil(t, Keep(Default), "GOMEMLIMIT is set")
	var stopped *Floor
	stopped.Stop() // a floor that never started stops quietly
}
