package webhook

import (
	"container/list"
	"sync"
)

// DefaultDedupeSize is how many delivery ids are remembered by default:
// GitHub redelivers by hand or after a timeout, well within this many.
const DefaultDedupeSize = 10000

// seenSet remembers the most recent delivery ids (X-GitHub-Delivery), so a
// redelivered event is done once. It is a bounded LRU, safe for concurrent
// use.
type seenSet struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front: most recent
	items map[string]*list.Element
}

func newSeenSet(max int) *seenSet {
	if max <= 0 {
		max = DefaultDedupeSize
	}
	return &seenSet{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

// add records id and reports whether it is new. Adding is atomic with the
// check, so two concurrent deliveries of one id are done once.
func (s *seenSet) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[id]; ok {
		s.ll.MoveToFront(e)
		return false
	}
	s.items[id] = s.ll.PushFront(id)
	if s.ll.Len() > s.max {
		old := s.ll.Back()
		s.ll.Remove(old)
		delete(s.items, old.Value.(string))
	}
	return true
}

// forget removes id, for a delivery that was refused (queue full) so that a
// redelivery is not taken for a duplicate.
func (s *seenSet) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[id]; ok {
		s.ll.Remove(e)
		delete(s.items, id)
	}
}
