package githubtest

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// bucket is one principal's primary budget and content-creation history.
type bucket struct {
	windowStart time.Time
	used        int
	created     []time.Time // content-creating requests in the last hour (fake time)

	points       map[string][]spent // by endpoint group: the last minute's requests
	graphQLStart time.Time          // the GraphQL budget's window (graphqlbudget.go)
	graphQLUsed  int                // points spent in it
	mutating     int                // mutations in flight
	lastMutation time.Time          // start of the latest admitted mutation
}

// rateInfo is what the x-ratelimit-* headers say.
type rateInfo struct {
	limit, remaining, used int
	reset                  time.Time // fake time
}

const (
	secondaryDocURL = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	primaryDocURL   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"
)

func (s *Server) bucketLocked(key string, now time.Time) *bucket {
	b := s.buckets[key]
	if b == nil {
		b = &bucket{windowStart: now}
		s.buckets[key] = b
	}
	if now.Sub(b.windowStart) >= time.Hour {
		b.windowStart, b.used = now, 0
	}
	return b
}

func (s *Server) rateLocked(b *bucket) rateInfo {
	limit := s.cfg.primaryLimit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	return rateInfo{limit: limit, used: b.used, remaining: max(limit-b.used, 0), reset: b.windowStart.Add(time.Hour)}
}

// rate returns the current primary budget of a principal.
func (s *Server) rate(key string) rateInfo {
	now := s.clock.Now()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	return s.rateLocked(s.bucketLocked(key, now))
}

// admit checks the primary and content-creation limits for one request. It returns a non-nil
// rejection to send instead of handling the request.
func (s *Server) admit(key string, class Class) (rateInfo, *limitRejection) {
	now := s.clock.Now()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	b := s.bucketLocked(key, now)
	ri := s.rateLocked(b)
	if s.cfg.primaryLimit > 0 && ri.remaining == 0 {
		return ri, &limitRejection{
			status:  s.cfg.primaryStatus,
			message: "API rate limit exceeded for " + key + ".",
			docURL:  primaryDocURL,
		}
	}
	if class == ContentCreating && (s.cfg.ccPerMinute > 0 || s.cfg.ccPerHour > 0) {
		kept := b.created[:0]
		for _, t := range b.created {
			if now.Sub(t) < time.Hour {
				kept = append(kept, t)
			}
		}
		b.created = kept
		var inMinute []time.Time
		for _, t := range b.created {
			if now.Sub(t) < time.Minute {
				inMinute = append(inMinute, t)
			}
		}
		var wait time.Duration
		if s.cfg.ccPerMinute > 0 && len(inMinute) >= s.cfg.ccPerMinute {
			wait = inMinute[len(inMinute)-s.cfg.ccPerMinute].Add(time.Minute).Sub(now)
		}
		if s.cfg.ccPerHour > 0 && len(b.created) >= s.cfg.ccPerHour {
			wait = max(wait, b.created[len(b.created)-s.cfg.ccPerHour].Add(time.Hour).Sub(now))
		}
		if wait > 0 {
			rej := &limitRejection{
				status: s.secondaryStatus(),
				message: "You have exceeded a secondary rate limit and have been temporarily blocked from " +
					"content creation. Please retry your request again later.",
				docURL:   secondaryDocURL,
				keepRate: true,
			}
			if s.cfg.ccRetryAfter {
				rej.retryAfter = s.clock.wallDuration(wait)
			}
			return ri, rej
		}
		b.created = append(b.created, now)
	}
	return ri, nil
}

// charge counts a handled request against the primary budget (304s are free, as on GitHub).
func (s *Server) charge(key string) rateInfo {
	now := s.clock.Now()
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	b := s.bucketLocked(key, now)
	b.used++
	return s.rateLocked(b)
}

// enter counts a request in flight; it reports false when the concurrency limit is exceeded.
func (s *Server) enter() bool {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.inflight++
	return s.cfg.concurrency <= 0 || s.inflight <= s.cfg.concurrency
}

func (s *Server) leave() {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.inflight--
}

// limitRejection is a primary or secondary limit answer.
type limitRejection struct {
	status     int
	message    string
	docURL     string
	retryAfter time.Duration // wall time; 0: no Retry-After header
	keepRate   bool          // secondary: rate headers show the real remaining budget
}

func (s *Server) setRateHeaders(h http.Header, ri rateInfo, zero bool) {
	remaining := ri.remaining
	if zero {
		remaining = 0
	}
	h.Set("X-Ratelimit-Limit", strconv.Itoa(ri.limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(ri.used))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(s.clock.toWall(ri.reset).Add(time.Second-1).Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
}

// AdvanceClock moves the fake clock forward, e.g. past a limit window (Changed signals it).
func (s *Server) AdvanceClock(d time.Duration) {
	s.clock.Advance(d)
	s.changes.notify()
}

// Now returns the server's fake time.
func (s *Server) Now() time.Time { return s.clock.Now() }
