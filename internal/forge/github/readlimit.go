package github

import (
	"net/http"
)

// DefaultReadConcurrency bounds concurrent reads per installation. GitHub allows 100 concurrent
// requests but recommends far fewer; 10 keeps a fan-out over thousands of repos polite.
const DefaultReadConcurrency = 10

// ReadLimitTransport bounds the number of reads in flight with a semaphore, so a fan-out over
// thousands of repos cannot open hundreds of connections to GitHub at once. Writes are already
// serialised by BudgetTransport and pass straight through.
type ReadLimitTransport struct {
	next http.RoundTripper
	sem  chan struct{}
}

// NewReadLimitTransport returns a ReadLimitTransport allowing n concurrent reads
// (DefaultReadConcurrency when n <= 0).
func NewReadLimitTransport(next http.RoundTripper, n int) *ReadLimitTransport {
	if n <= 0 {
		n = DefaultReadConcurrency
	}
	return &ReadLimitTransport{next: next, sem: make(chan struct{}, n)}
}

// RoundTrip implements http.RoundTripper. The slot is held until the response headers arrive;
// GitHub's JSON bodies are small and read right after.
func (t *ReadLimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = classified(req)
	if !isReadRequest(req) {
		return t.next.RoundTrip(req)
	}
	select {
	case t.sem <- struct{}{}:
	case <-req.Context().Done():
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, req.Context().Err()
	}
	defer func() { <-t.sem }()
	return t.next.RoundTrip(req)
}
