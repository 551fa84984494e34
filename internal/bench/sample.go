package bench

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// heapObjects is the runtime metric for bytes in live and not yet swept heap
// objects: the equivalent of MemStats.HeapAlloc, readable without stopping
// the world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// HeapSampler records the peak Go heap of the process while it runs,
// sampling every interval.
type HeapSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
}

// StartHeapSampler collects garbage (so the peak starts from the live heap)
// and starts sampling every interval.
func StartHeapSampler(interval time.Duration) *HeapSampler {
	runtime.GC()
	s := &HeapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *HeapSampler) sample() {
	m := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	v := m[0].Value.Uint64()
	s.mu.Lock()
	s.peak = max(s.peak, v)
	s.mu.Unlock()
}

// Stop ends sampling and returns the peak heap in bytes.
func (s *HeapSampler) Stop() uint64 {
	s.sample()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}
