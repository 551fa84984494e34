package github

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults for RetryConfig.
const (
	DefaultMaxAttempts = 4
	// DefaultSecondaryWait is how long to wait after a secondary limit that names no time.
	// GitHub: "wait for at least one minute before retrying".
	DefaultSecondaryWait = time.Minute
	defaultLimitWaits    = 3
	defaultBaseDelay     = time.Second
	defaultMaxDelay      = 30 * time.Second
)

// RetryConfig configures a RetryTransport.
type RetryConfig struct {
	// MaxAttempts bounds attempts of a request failing with 502/503/504 (or, for reads, a network
	// error); default DefaultMaxAttempts.
	MaxAttempts int
	// MaxWait is the longest wait for a rate limit before failing with ErrRateLimited instead;
	// default DefaultMaxWait.
	MaxWait time.Duration
	// Clock waits between attempts; nil means the system clock.
	Clock Clock
	// Budget, when set, is paused whenever GitHub reports a limit, so that no other request of
	// the installation is sent while this one waits.
	Budget *Budget
	// Logger receives one line per wait; nil discards.
	Logger *slog.Logger
}

// RetryTransport retries what GitHub asks to be retried and nothing else:
//   - 502, 503, 504: jittered exponential backoff, up to MaxAttempts (501 and other 5xx are not
//     transient);
//   - 429 and 403 secondary limits: wait Retry-After; when GitHub names no time, a minute,
//     then twice as long at each new limit of the same request (GitHub's guidance: "wait for
//     at least one minute", then "an exponentially increasing amount of time between retries");
//   - 403/429 with x-ratelimit-remaining: 0 (primary limit): wait until x-ratelimit-reset;
//   - a limit lifting later than MaxWait fails at once with a *RateLimitedError so the caller
//     can leave the work queued.
//
// Every other status, 422 included, is returned as is. Bodies are replayed with req.GetBody; a
// request whose body cannot be replayed is sent once. Waits respect the request's context.
type RetryTransport struct {
	next http.RoundTripper
	cfg  RetryConfig
}

// NewRetryTransport returns a RetryTransport in front of next.
func NewRetryTransport(next http.RoundTripper, cfg RetryConfig) *RetryTransport {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	cfg.Clock = clockOrSystem(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &RetryTransport{next: next, cfg: cfg}
}

// RoundTrip implements http.RoundTripper.
func (t *RetryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = classified(req)
	ctx := req.Context()
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	failures, limitWaits, blind := 0, 0, 0
	for attempt := 0; ; attempt++ {
		r, err := replay(req, attempt)
		if err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			failures++
			if ctx.Err() != nil || !isReadRequest(req) || !replayable || failures >= t.cfg.MaxAttempts ||
				errors.Is(err, ErrReadOnly) || errors.Is(err, ErrRateLimited) {
				return nil, err
			}
			if err := t.sleep(ctx, req, backoff(failures), "network error"); err != nil {
				return nil, err
			}
			continue
		}
		switch code := resp.StatusCode; {
		case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
			failures++
			if failures >= t.cfg.MaxAttempts || !replayable {
				return resp, nil
			}
			discard(resp)
			if err := t.sleep(ctx, req, backoff(failures), strconv.Itoa(code)); err != nil {
				return nil, err
			}
		case code == http.StatusTooManyRequests || code == http.StatusForbidden:
			now := t.cfg.Clock.Now()
			wait, reason, limited := limitWait(resp, now)
			if !limited {
				return resp, nil
			}
			if wait == DefaultSecondaryWait && reason == "secondary" && resp.Header.Get("Retry-After") == "" {
				// No time named: exponential backoff from a minute.
				wait = DefaultSecondaryWait << min(blind, 10)
				blind++
			}
			until := now.Add(wait)
			if t.cfg.Budget != nil {
				t.cfg.Budget.Pause(until)
			}
			if wait > t.cfg.MaxWait {
				discard(resp)
				t.cfg.Logger.Warn("GitHub rate limit lifts too late, giving up", "method", req.Method,
					"url", redact(req.URL), "reason", reason, "reset", until)
				return nil, &RateLimitedError{Method: req.Method, URL: redact(req.URL), Reset: until, Reason: reason}
			}
			limitWaits++
			if limitWaits > defaultLimitWaits || !replayable {
				return resp, nil
			}
			discard(resp)
			if err := t.sleep(ctx, req, wait, reason+" rate limit"); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

func (t *RetryTransport) sleep(ctx context.Context, req *http.Request, d time.Duration, why string) error {
	t.cfg.Logger.Info("waiting before retrying GitHub request", "method", req.Method, "url", redact(req.URL),
		"reason", why, "wait", d)
	return t.cfg.Clock.Sleep(ctx, d)
}

// replay returns the request for the given attempt: req itself first, then clones with a fresh
// body from GetBody.
func replay(req *http.Request, attempt int) (*http.Request, error) {
	if attempt == 0 {
		return req, nil
	}
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	return r, nil
}

// backoff returns the n-th (1-based) retry delay: exponential, capped, with equal jitter so that
// many workers hitting the same 502 do not retry in lockstep.
func backoff(n int) time.Duration {
	d := defaultBaseDelay << min(n-1, 10)
	d = min(d, defaultMaxDelay)
	return d/2 + rand.N(d/2+1)
}

// limitWait reports whether a 403/429 is a rate limit and how long to wait:
// Retry-After first, then a primary limit's x-ratelimit-reset, then a minute for a secondary
// limit that names no time. A 403 that is not a limit (permissions) is not one.
func limitWait(resp *http.Response, now time.Time) (wait time.Duration, reason string, limited bool) {
	h := resp.Header
	if d, ok := parseRetryAfter(h.Get("Retry-After"), now); ok {
		return d, "secondary", true
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			// One second of slack: GitHub's reset is rounded down to the second.
			return max(time.Unix(reset, 0).Sub(now)+time.Second, time.Second), "primary", true
		}
		return DefaultSecondaryWait, "primary", true
	}
	if resp.StatusCode == http.StatusTooManyRequests || mentionsSecondaryLimit(resp) {
		return DefaultSecondaryWait, "secondary", true
	}
	return 0, "", false
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// mentionsSecondaryLimit peeks at a 403's body for GitHub's secondary-limit message and puts
// the body back for the caller.
func mentionsSecondaryLimit(resp *http.Response) bool {
	return bodyContains(resp, "secondary rate limit", "abuse")
}

// notAccessibleByIntegration is GitHub's message for what an installation token may not do.
const notAccessibleByIntegration = "resource not accessible by integration"

// bodyContains peeks at the first 64 KiB of a response body for any of the lower-case words
// and puts the body back for the caller.
func bodyContains(resp *http.Response, words ...string) bool {
	if resp.Body == nil {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(data), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	msg := strings.ToLower(string(data))
	for _, w := range words {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// discard drains a little of a response we will not return, so the connection can be reused.
func discard(resp *http.Response) {
	if resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}
}
