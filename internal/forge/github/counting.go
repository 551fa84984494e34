package github

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RequestStats counts the requests that reached the network, by class and by status, and
// remembers the last rate-limit headers GitHub sent. serve exports them as Prometheus metrics;
// apply reports them at the end of a run.
type RequestStats struct {
	// Reads are GET/HEAD requests, including conditional ones answered with 304.
	Reads int64
	// Writes are mutating requests, including content-creating ones.
	Writes int64
	// ContentWrites are writes GitHub counts as content creation (80/min, 500/h).
	ContentWrites int64
	// NotModified are 304 answers to conditional GETs: free, served from the ETag cache.
	NotModified int64
	// Errors are requests that got no HTTP response at all (network, TLS, cancellation).
	Errors int64
	// ByStatus counts responses per HTTP status code.
	ByStatus map[int]int64
	// RateRemaining and RateReset are the last x-ratelimit-remaining/-reset of the REST budget
	// seen (-1 and zero when GitHub has not sent them yet). A GraphQL answer's headers are its
	// own budget's, in points (x-ratelimit-resource: graphql), and are not counted here.
	RateRemaining int64
	RateReset     time.Time
}

// Counters accumulates RequestStats; it is safe for concurrent use. It lives in the Client (not
// in a global) so that each installation has its own and serve can export them.
type Counters struct {
	mu sync.Mutex
	s  RequestStats
}

// NewCounters returns empty Counters.
func NewCounters() *Counters {
	return &Counters{s: RequestStats{ByStatus: map[int]int64{}, RateRemaining: -1}}
}

// Stats returns a snapshot.
func (c *Counters) Stats() RequestStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	s.ByStatus = maps.Clone(c.s.ByStatus)
	return s
}

func (c *Counters) record(k kind, resp *http.Response, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch k {
	case kindRead:
		c.s.Reads++
	case kindContent:
		c.s.ContentWrites++
		c.s.Writes++
	default:
		c.s.Writes++
	}
	if err != nil || resp == nil {
		c.s.Errors++
		return
	}
	c.s.ByStatus[resp.StatusCode]++
	if resp.StatusCode == http.StatusNotModified {
		c.s.NotModified++
	}
	if res := resp.Header.Get("X-RateLimit-Resource"); res != "" && res != "core" {
		return
	}
	if v, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Remaining"), 10, 64); err == nil {
		c.s.RateRemaining = v
	}
	if v, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		c.s.RateReset = time.Unix(v, 0)
	}
}

// CountingTransport records every request that reaches it in Counters. It sits next to the
// network so that retries, 304s and token refresh retries are all counted as GitHub sees them.
type CountingTransport struct {
	next     http.RoundTripper
	counters *Counters
}

// NewCountingTransport returns a CountingTransport recording into c.
func NewCountingTransport(next http.RoundTripper, c *Counters) *CountingTransport {
	return &CountingTransport{next: next, counters: c}
}

// RoundTrip implements http.RoundTripper.
func (t *CountingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = classified(req)
	k := kindOf(req)
	resp, err := t.next.RoundTrip(req)
	t.counters.record(k, resp, err)
	return resp, err
}
