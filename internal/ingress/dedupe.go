package ingress

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultDedupeSize is how many delivery ids are remembered by default: a
// redelivery (asked for by hand or from the App's delivery log; GitHub does not
// redeliver by itself) comes well within this many.
const DefaultDedupeSize = 10000

// seenSet remembers the most recent delivery ids (X-GitHub-Delivery), so a
// redelivered event is done once: a bounded LRU (hashicorp/golang-lru), safe
// for concurrent use.
type seenSet struct {
	c *lru.Cache[string, struct{}]
}

func newSeenSet(max int) *seenSet {
	if max <= 0 {
		max = DefaultDedupeSize
	}
	c, _ := lru.New[string, struct{}](max) // fails only for a size <= 0, excluded above
	return &seenSet{c: c}
}

// add records id and reports whether it is new. Adding is atomic with the
// check (ContainsOrAdd holds the cache's lock), so two concurrent deliveries
// of one id are done once. A duplicate refreshes the id's recency.
func (s *seenSet) add(id string) bool {
	if seen, _ := s.c.ContainsOrAdd(id, struct{}{}); seen {
		s.c.Get(id)
		return false
	}
	return true
}

// forget removes id, for a delivery that was refused (queue full) so that a
// redelivery is not taken for a duplicate.
func (s *seenSet) forget(id string) { s.c.Remove(id) }

// contains reports whether id was received (and not refused), without refreshing it.
func (s *seenSet) contains(id string) bool { return s.c.Contains(id) }
