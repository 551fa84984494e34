package github

import (
	"fmt"
	"net/http"
)

// ReadOnlyTransport refuses every request but GET, HEAD and OPTIONS with ErrReadOnly, without
// touching the network. fleetbot plan runs on a client built with it, so "plan never writes"
// holds by construction rather than by code review. GitHub App token minting does not pass
// through it (it happens on the app's own transport), so App auth works in read-only mode.
type ReadOnlyTransport struct {
	next http.RoundTripper
}

// NewReadOnlyTransport returns a ReadOnlyTransport in front of next.
func NewReadOnlyTransport(next http.RoundTripper) *ReadOnlyTransport {
	return &ReadOnlyTransport{next: next}
}

// RoundTrip implements http.RoundTripper.
func (t *ReadOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = classified(req)
	if isReadRequest(req) {
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close() // the RoundTripper contract: close the body even on error
	}
	return nil, fmt.Errorf("%s %s: %w", req.Method, redact(req.URL), ErrReadOnly)
}
