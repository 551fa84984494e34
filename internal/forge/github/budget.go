package github

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Defaults for BudgetConfig, from GitHub's documented secondary limits
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
const (
	DefaultPerMinute = 80
	DefaultPerHour   = 500
	DefaultMaxWait   = 15 * time.Minute
	// DefaultMinInterval is the least time between the starts of two mutations of an
	// installation. GitHub: "If you are making a large number of POST, PATCH, PUT, or DELETE
	// requests for a single user or client ID, wait at least one second between each request."
	DefaultMinInterval = time.Second
)

// BudgetConfig sets an installation's write budget.
type BudgetConfig struct {
	// PerMinute and PerHour cap content-creating requests in any rolling minute and hour
	// (defaults DefaultPerMinute and DefaultPerHour).
	PerMinute, PerHour int
	// MaxWait is the longest any request waits for a limit (a content window, a pause, a primary
	// reset) before failing with ErrRateLimited instead (default DefaultMaxWait).
	MaxWait time.Duration
	// MinInterval is the least time between the starts of two mutations (default
	// DefaultMinInterval); negative: none, for tests on the system clock that count requests,
	// not time.
	MinInterval time.Duration
	// Clock is used for every wait in the client (windows, pauses, retry backoff); nil means the
	// system clock.
	Clock Clock
	// Share, when set, is how many replicas share the installation's budget now (serve's live
	// members on Kubernetes Leases): this process gets PerMinute/Share and PerHour/Share (at
	// least 1), so N replicas together stay within GitHub's limits instead of multiplying them.
	Share func() int
}

func (c BudgetConfig) withDefaults() BudgetConfig {
	if c.PerMinute <= 0 {
		c.PerMinute = DefaultPerMinute
	}
	if c.PerHour <= 0 {
		c.PerHour = DefaultPerHour
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	switch {
	case c.MinInterval == 0:
		c.MinInterval = DefaultMinInterval
	case c.MinInterval < 0:
		c.MinInterval = 0
	}
	c.Clock = clockOrSystem(c.Clock)
	return c
}

// BudgetStats is a snapshot of a Budget.
type BudgetStats struct {
	// Writes and ContentWrites count the mutating requests admitted.
	Writes, ContentWrites int64
	// Waited is the total time writes and reads spent waiting for windows and pauses.
	Waited time.Duration
	// Refused counts requests failed with ErrRateLimited instead of waiting.
	Refused int64
	// Pauses counts secondary/primary limit pauses; PausedUntil is the latest.
	Pauses      int64
	PausedUntil time.Time
}

// Budget is one installation's write budget: mutations run one at a time and start at least
// MinInterval apart (GitHub's guidance for avoiding secondary limits), content-creating ones pass a two-window limiter (PerMinute in any
// rolling minute, PerHour in any rolling hour), and a secondary limit reported by GitHub pauses
// everything until Retry-After. It is safe for concurrent use and shared by every request of
// the installation.
type Budget struct {
	cfg  BudgetConfig
	slot chan struct{} // capacity 1: the one mutation in flight

	mu          sync.Mutex
	recent      []time.Time // admission times of recent content writes, oldest first, <= PerHour
	lastWrite   time.Time   // admission time of the latest mutation
	pausedUntil time.Time
	stats       BudgetStats
}

// NewBudget returns a Budget; zero fields of cfg take their defaults.
func NewBudget(cfg BudgetConfig) *Budget {
	cfg = cfg.withDefaults()
	return &Budget{cfg: cfg, slot: make(chan struct{}, 1)}
}

// Config returns the budget's configuration with defaults applied.
func (b *Budget) Config() BudgetConfig { return b.cfg }

// Stats returns a snapshot.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.PausedUntil = b.pausedUntil
	return s
}

// Pause stops every request of the installation until until (a secondary limit's Retry-After,
// or a primary limit's reset). A shorter pause never shortens a longer one.
func (b *Budget) Pause(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.pausedUntil) {
		b.pausedUntil = until
		b.stats.Pauses++
	}
}

// Afford reports whether n more content-creating writes would all be admitted within MaxWait,
// and how long from now the last of them would wait. Call it before starting a repo that needs
// n content writes (blobs, tree, commit, ref, PR) to leave the repo queued and report it rather
// than start and block for an hour half-way. It reserves nothing: concurrent runs share the
// windows, so a write can still fail with ErrRateLimited.
func (b *Budget) Afford(n int) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Clock.Now()
	wait = b.delayLocked(now, n)
	if n > 0 && b.cfg.MinInterval > 0 {
		// n mutations one MinInterval apart, the first no sooner than MinInterval after the last.
		first := now
		if !b.lastWrite.IsZero() {
			first = maxTime(now, b.lastWrite.Add(b.cfg.MinInterval))
		}
		wait = max(wait, first.Sub(now)+time.Duration(n-1)*b.cfg.MinInterval)
	}
	return wait <= b.cfg.MaxWait, wait
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// delayLocked returns how long from now the n-th next content write would wait.
func (b *Budget) delayLocked(now time.Time, n int) time.Duration {
	b.pruneLocked(now)
	t := now
	if b.pausedUntil.After(t) {
		t = b.pausedUntil
	}
	if n <= 0 {
		return t.Sub(now)
	}
	sim := b.recent
	if n > 1 {
		sim = append(make([]time.Time, 0, len(b.recent)+n), b.recent...)
	}
	for i := 0; i < n; i++ {
		t = b.earliestLocked(sim, t)
		if i < n-1 {
			sim = append(sim, t)
		}
	}
	return t.Sub(now)
}

// earliestLocked returns the earliest time >= t at which one more write fits both windows given
// the admission times in sim (sorted). A write admitted at t counts in (t-window, t].
func (b *Budget) earliestLocked(sim []time.Time, t time.Time) time.Time {
	perMinute, perHour := b.limits()
	if n := len(sim); n >= perMinute {
		if free := sim[n-perMinute].Add(time.Minute); free.After(t) {
			t = free
		}
	}
	if n := len(sim); n >= perHour {
		if free := sim[n-perHour].Add(time.Hour); free.After(t) {
			t = free
		}
	}
	return t
}

// limits are this process's windows: the configured ones divided among the replicas sharing
// the installation (BudgetConfig.Share), at least one write each.
func (b *Budget) limits() (perMinute, perHour int) {
	n := 1
	if b.cfg.Share != nil {
		n = max(1, b.cfg.Share())
	}
	return max(1, b.cfg.PerMinute/n), max(1, b.cfg.PerHour/n)
}

func (b *Budget) pruneLocked(now time.Time) {
	i := 0
	for i < len(b.recent) && !b.recent[i].Add(time.Hour).After(now) {
		i++
	}
	if over := len(b.recent) - i - b.cfg.PerHour; over > 0 {
		i += over
	}
	if i > 0 {
		b.recent = append(b.recent[:0], b.recent[i:]...)
	}
}

// acquireWrite takes the mutation slot and, for content writes, a place in the windows, waiting
// as needed. The returned release frees the slot.
func (b *Budget) acquireWrite(req *http.Request, content bool) (release func(), err error) {
	ctx := req.Context()
	select {
	case b.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release = func() { <-b.slot }
	for {
		b.mu.Lock()
		now := b.cfg.Clock.Now()
		var wait time.Duration
		if content {
			wait = b.delayLocked(now, 1)
		} else if b.pausedUntil.After(now) {
			wait = b.pausedUntil.Sub(now)
		}
		if !b.lastWrite.IsZero() {
			wait = max(wait, b.lastWrite.Add(b.cfg.MinInterval).Sub(now))
		}
		if wait <= 0 {
			b.lastWrite = now
			b.stats.Writes++
			if content {
				b.stats.ContentWrites++
				b.recent = append(b.recent, now)
			}
			b.mu.Unlock()
			return release, nil
		}
		b.mu.Unlock()
		if err := b.wait(ctx, req, now, wait, content); err != nil {
			release()
			return nil, err
		}
	}
}

// waitPause blocks a read while the installation is paused.
func (b *Budget) waitPause(req *http.Request) error {
	for {
		b.mu.Lock()
		now := b.cfg.Clock.Now()
		wait := b.pausedUntil.Sub(now)
		b.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		if err := b.wait(req.Context(), req, now, wait, false); err != nil {
			return err
		}
	}
}

// wait sleeps for d unless that exceeds MaxWait or the context's deadline, in which case it
// fails at once with a RateLimitedError: there is no point holding a worker until its deadline.
func (b *Budget) wait(ctx context.Context, req *http.Request, now time.Time, d time.Duration, content bool) error {
	refuse := d > b.cfg.MaxWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		refuse = true
	}
	if refuse {
		reason := "paused"
		b.mu.Lock()
		if content && !b.pausedUntil.After(now) {
			reason = "content budget"
		}
		b.stats.Refused++
		b.mu.Unlock()
		return &RateLimitedError{Method: req.Method, URL: redact(req.URL), Reset: now.Add(d), Reason: reason}
	}
	if err := b.cfg.Clock.Sleep(ctx, d); err != nil {
		return err
	}
	b.mu.Lock()
	b.stats.Waited += d
	b.mu.Unlock()
	return nil
}

// BudgetTransport makes every request of an installation obey its Budget: mutations one at a
// time and inside the content-creation windows, everything held while GitHub has paused us.
// It sits below RetryTransport so that each retry attempt is admitted again.
type BudgetTransport struct {
	next   http.RoundTripper
	budget *Budget
}

// NewBudgetTransport returns a BudgetTransport enforcing b.
func NewBudgetTransport(next http.RoundTripper, b *Budget) *BudgetTransport {
	return &BudgetTransport{next: next, budget: b}
}

// RoundTrip implements http.RoundTripper. The mutation slot is released when the response
// headers arrive: GitHub has finished the write by then.
func (t *BudgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = classified(req)
	k := kindOf(req)
	if k == kindRead {
		if err := t.budget.waitPause(req); err != nil {
			closeBody(req)
			return nil, err
		}
		return t.next.RoundTrip(req)
	}
	release, err := t.budget.acquireWrite(req, k == kindContent)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	defer release()
	resp, err := t.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) {
		// Pause before the next mutation can take the slot, not only once the retry layer
		// above has read the answer: nothing is sent between a limit and its wait.
		now := t.budget.cfg.Clock.Now()
		if wait, _, limited := limitWait(resp, now); limited {
			t.budget.Pause(now.Add(wait))
		}
	}
	return resp, err
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
