package ingress

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSeenSet(t *testing.T) {
	t.Parallel()
	s := newSeenSet(2)
	assert.True(t, s.add("a"))
	assert.False(t, s.add("a"), "a duplicate")
	assert.True(t, s.add("b"))
	assert.False(t, s.add("a"), "a is refreshed by its duplicate")
	assert.True(t, s.add("c"), "evicts b, the least recent")
	assert.True(t, s.add("b"), "b was forgotten by eviction")
	s.forget("b")
	assert.True(t, s.add("b"), "a forgotten id is new again")
}

func TestSeenSetConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s := newSeenSet(100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	news := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.add("same") {
				mu.Lock()
				news++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, news, "one delivery of an id is new, however many arrive at once")
}

// BenchmarkSeenSet adds delivery ids to a full default-size set, one in four a redelivery.
func BenchmarkSeenSet(b *testing.B) {
	s := newSeenSet(DefaultDedupeSize)
	ids := make([]string, 4*DefaultDedupeSize)
	for i := range ids {
		ids[i] = "delivery-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[i%len(ids)]
		if i%4 == 3 {
			id = ids[(i-1)%len(ids)]
		}
		s.add(id)
	}
}
