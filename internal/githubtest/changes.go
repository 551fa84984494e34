package githubtest

import "sync"

// changes is a broadcast of the fake's changes of state: every notify closes the channel that
// wait returned before it (and nothing else: there is no global state and no goroutine).
type changes struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits
}

// wait returns the channel the next notify closes.
func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// notify wakes everyone waiting on a channel wait returned.
func (c *changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Changed returns a channel closed at the fake's next change of state: a request that may write
// answered (every class but Read: a ref moved, a pull request, a check run, a status; logged
// before the client reads the answer), a webhook delivery made (once its answer is in the
// delivery log), or the clock moved by AdvanceClock. A test waiting for what a client does
// through the fake takes the channel first, then checks its condition, and waits on the channel
// only when the condition does not hold yet: no change between the check and the wait is missed,
// and no timer is needed. Reads do not signal, so a condition that reads through the API does
// not wake itself.
func (s *Server) Changed() <-chan struct{} { return s.changes.wait() }
