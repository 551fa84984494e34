package githubtest

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// FaultSpec says what to do to matching requests.
type FaultSpec struct {
	// Status, when non-zero, answers with this status and a GitHub-shaped error body.
	Status int
	// Message is the error message for Status (default: the status text).
	Message string
	// Latency delays the request (wall time) before it is handled or failed.
	Latency time.Duration
	// Drop closes the connection without an answer.
	Drop bool
	// LoseResponse handles the request (a write happens, webhooks fire) and then closes the
	// connection without an answer: a response lost to a timeout after GitHub acted.
	LoseResponse bool
	// Times limits how many matching calls are affected (0: all).
	Times int
	// OnCall affects only the n-th matching call (1-based; 0: every call).
	OnCall int
	// Mutation, when set, matches only GraphQL mutations that run this field of Mutation
	// ("updateRefs"), not the queries and other mutations sent to the same route.
	Mutation string
}

type fault struct {
	method string
	route  string         // exact route match, or
	re     *regexp.Regexp // glob over the path
	spec   FaultSpec
	calls  int
	hits   int
}

// Fault installs a fault for matching requests. pattern is either a route exactly as the request
// log names it ("POST /repos/{owner}/{repo}/git/commits"), or a method and a path glob where *
// matches any run of characters ("PATCH /api/v3/repos/acme/*/git/refs/*"; method "*" for any),
// or "*" for every request. Faults apply in the order installed; the first that fires wins.
func (s *Server) Fault(pattern string, spec FaultSpec) {
	f := &fault{spec: spec}
	method, rest, ok := strings.Cut(pattern, " ")
	switch {
	case pattern == "*":
		f.method = "*"
		f.re = regexp.MustCompile(`^`)
	case ok && strings.Contains(rest, "{"):
		f.method, f.route = method, pattern
	case ok:
		f.method = method
		f.re = globRegexp(rest)
	default:
		f.method = "*"
		f.re = globRegexp(pattern)
	}
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.faults = append(s.faults, f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.faults = nil
}

func globRegexp(glob string) *regexp.Regexp {
	parts := strings.Split(glob, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// matchFault finds the fault that fires for this request, counting calls.
func (s *Server) matchFault(method, path, route string, mutations []string) (FaultSpec, bool) {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	for _, f := range s.faults {
		if f.spec.Mutation != "" && !slices.Contains(mutations, f.spec.Mutation) {
			continue
		}
		if f.route != "" {
			if f.route != route {
				continue
			}
		} else if (f.method != "*" && f.method != method) ||
			!(f.re.MatchString(path) || f.re.MatchString(strings.TrimPrefix(path, apiPrefix))) {
			continue
		}
		f.calls++
		if f.spec.OnCall > 0 && f.calls != f.spec.OnCall {
			continue
		}
		if f.spec.Times > 0 && f.hits >= f.spec.Times {
			continue
		}
		f.hits++
		return f.spec, true
	}
	return FaultSpec{}, false
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	writeError(w, http.StatusBadGateway, "connection dropped by fault")
}
