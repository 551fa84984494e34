package githubtest

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// GitHub's secondary rate limits beyond content creation, as its documentation describes them
// (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits):
// points per minute per endpoint group (a GET, HEAD or OPTIONS or a GraphQL query costs 1, any
// other request or a GraphQL mutation 5), and its best practices, which the fake can enforce
// as limits so a client that ignores them fails a test: no concurrent mutations for one
// principal, and a pause between mutations. Every secondary-limit answer is 403 by default, or
// the status set with WithSecondaryLimitStatus (GitHub sends either).

// WithSecondaryLimitStatus chooses the status of every secondary-limit answer: 403 (default)
// or 429.
func WithSecondaryLimitStatus(status int) Option {
	return func(c *config) { c.secondaryStatus = status }
}

// WithPointsLimit turns on the points limit: perMinute points per principal and endpoint group
// (REST, GraphQL) in any rolling fake minute. withRetryAfter adds a Retry-After header.
func WithPointsLimit(perMinute int, withRetryAfter bool) Option {
	return func(c *config) { c.pointsPerMinute, c.pointsRetryAfter = perMinute, withRetryAfter }
}

// WithMutationPacing refuses, as a secondary limit with no Retry-After, a mutation (any
// request but GET, HEAD, OPTIONS, a git fetch and a GraphQL query) that a principal sends while
// another of its mutations is in flight, or less than minInterval (fake time) after the start
// of its previous one: GitHub's guidance, "make requests serially" and "wait at least one
// second between each request" that mutates.
func WithMutationPacing(minInterval time.Duration) Option {
	return func(c *config) { c.pacing, c.pacingInterval = true, minInterval }
}

// WithManualClock freezes the fake clock: it moves only by AdvanceClock, and durations in
// headers (Retry-After, x-ratelimit-reset, expires_at) are in fake time. A test whose client
// waits on a clock that advances the server's (Sleep = AdvanceClock) then runs without any
// wall-clock wait and without depending on the machine's speed.
func WithManualClock() Option { return func(c *config) { c.manualClock = true } }

// pointsCost is what a request costs in the points limit.
func pointsCost(class Class) int {
	if class == Read {
		return 1
	}
	return 5
}

// spent is one request's points at a time.
type spent struct {
	at     time.Time
	points int
}

// admitSecondary checks the points limit and the mutation pacing of one request. It returns a
// rejection to send instead of handling it, or a release to call once it was answered.
func (s *Server) admitSecondary(key, route string, class Class) (func(), *limitRejection) {
	now := s.clock.Now()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	b := s.bucketLocked(key, now)
	group := "rest"
	if route == "POST /api/graphql" {
		group = "graphql"
	}
	if s.cfg.pointsPerMinute > 0 {
		if b.points == nil {
			b.points = map[string][]spent{}
		}
		kept := b.points[group][:0]
		used := 0
		for _, p := range b.points[group] {
			if now.Sub(p.at) < time.Minute {
				kept = append(kept, p)
				used += p.points
			}
		}
		b.points[group] = kept
		cost := pointsCost(class)
		if used+cost > s.cfg.pointsPerMinute {
			rej := s.secondaryRejection("You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
			if s.cfg.pointsRetryAfter {
				// The wait until enough of the window's points have expired.
				free := used + cost - s.cfg.pointsPerMinute
				for _, p := range kept {
					free -= p.points
					if free <= 0 {
						rej.retryAfter = s.clock.wallDuration(p.at.Add(time.Minute).Sub(now))
						break
					}
				}
			}
			return nil, rej
		}
		b.points[group] = append(kept, spent{at: now, points: cost})
	}
	if !s.cfg.pacing || class == Read {
		return func() {}, nil
	}
	if b.mutating > 0 || (!b.lastMutation.IsZero() && now.Sub(b.lastMutation) < s.cfg.pacingInterval) {
		return nil, s.secondaryRejection("You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
	}
	b.mutating++
	b.lastMutation = now
	// Released once, when the answer is about to leave (a client that has it may send the
	// next mutation at once) or, failing that, when the handler returns.
	return sync.OnceFunc(func() {
		s.ctlMu.Lock()
		defer s.ctlMu.Unlock()
		b.mutating--
	}), nil
}

// secondaryRejection is a secondary-limit answer with the configured status; the rate headers
// show the real remaining budget, as GitHub's do.
func (s *Server) secondaryRejection(msg string) *limitRejection {
	return &limitRejection{status: s.secondaryStatus(), message: msg, docURL: secondaryDocURL, keepRate: true}
}

func (s *Server) secondaryStatus() int {
	if s.cfg.secondaryStatus == http.StatusTooManyRequests {
		return http.StatusTooManyRequests
	}
	return http.StatusForbidden
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) int { return int(math.Max(1, math.Ceil(d.Seconds()))) }
