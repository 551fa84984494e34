package github

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// ErrReadOnly is returned, before anything reaches the network, for every mutating request made
// through a read-only client (fleetbot plan).
var ErrReadOnly = errors.New("read-only GitHub client refuses to write")

// ErrRateLimited means a GitHub limit (primary, secondary or fleetbot's own content-creation
// budget) blocks the request for longer than the client is willing to wait. The concrete error is
// a *RateLimitedError carrying the time the limit lifts, so the caller can leave the work queued.
var ErrRateLimited = errors.New("GitHub rate limit")

// ErrNotFound marks a 404 (or 410) from GitHub once wrapped with Wrap, so callers can write
// errors.Is(err, ErrNotFound) instead of inspecting status codes.
var ErrNotFound = errors.New("not found on GitHub")

// RateLimitedError is the ErrRateLimited a transport returns instead of waiting past its limit.
type RateLimitedError struct {
	// Method and URL name the request that was refused (URL redacted).
	Method, URL string
	// Reset is when the limit is expected to lift.
	Reset time.Time
	// Reason says which limit: "primary", "secondary", "paused" (the installation is paused
	// after a limit) or "content budget".
	Reason string
}

// Error implements error.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%s %s: %s rate limit until %s", e.Method, e.URL, e.Reason, e.Reset.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// Outcome implements report.Classifier: deferred until Reset, for a GitHub rate limit
// (ReasonRateLimited) or fleetbot's own content budget (ReasonBudgetExhausted).
func (e *RateLimitedError) Outcome() report.Outcome {
	reason := report.ReasonRateLimited
	if e.Reason == reasonContentBudget {
		reason = report.ReasonBudgetExhausted
	}
	return report.Outcome{Class: report.ClassDeferred, Reason: reason, RetryAt: e.Reset}
}

// reasonContentBudget is RateLimitedError.Reason when fleetbot's own budget refused.
const reasonContentBudget = "content budget"

// OpError records what was being attempted, and on which repo, when a GitHub call failed.
type OpError struct {
	// Op is what was being attempted, e.g. "creating tree".
	Op string
	// Repo is "owner/name" (or the owner alone for org-level calls).
	Repo string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *OpError) Error() string { return e.Op + " " + e.Repo + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) and errors.Is(err, ErrRateLimited) follow Classify, so
// a go-github 404 or 429 matches the sentinels without callers knowing go-github's types.
func (e *OpError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return Classify(e.Err) == NotFound
	case ErrRateLimited:
		return Classify(e.Err) == RateLimited
	}
	return false
}

// Outcome implements report.Classifier: the class of the GitHub error it wraps (OutcomeOf), so
// that the class and a rate limit's reset reach reconcile's result and the front ends.
func (e *OpError) Outcome() report.Outcome { return OutcomeOf(e.Err) }

// Wrap annotates err with the operation and repo ("creating tree acme/cluster-a: ..."); it
// returns nil when err is nil, so it can wrap a go-github call's error unconditionally.
func Wrap(err error, op, repo string) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Repo: repo, Err: err}
}

// IsNotFound reports whether err is GitHub saying the object does not exist.
func IsNotFound(err error) bool { return Classify(err) == NotFound }

// Class is what the reconcile loop should do about an error.
type Class int

const (
	// OK is the class of a nil error.
	OK Class = iota
	// Retryable errors are transient (5xx, network, 202 still computing): retry later.
	Retryable
	// RateLimited errors lift at a known or estimated time: leave the work queued.
	RateLimited
	// Terminal errors will not go away by retrying (422, 401, permissions, read-only).
	Terminal
	// NotFound is a 404/410: the object (repo, ref, PR) does not exist.
	NotFound
)

// String returns the class name.
func (c Class) String() string {
	switch c {
	case OK:
		return "ok"
	case Retryable:
		return "retryable"
	case RateLimited:
		return "rate-limited"
	case Terminal:
		return "terminal"
	case NotFound:
		return "not-found"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Classify decides retry versus terminal for an error from this package's transports or from
// go-github. go-github v62 does not turn a 429 into a RateLimitError, so status codes are
// inspected here too: 429 and rate-limit 403s are RateLimited, 5xx Retryable, 404/410 NotFound,
// 422 and other 4xx Terminal.
func Classify(err error) Class {
	if err == nil {
		return OK
	}
	if errors.Is(err, ErrReadOnly) {
		return Terminal
	}
	if errors.Is(err, ErrRateLimited) {
		return RateLimited
	}
	if errors.Is(err, ErrNotFound) {
		return NotFound
	}
	var (
		rle   *gh.RateLimitError
		abuse *gh.AbuseRateLimitError
		acc   *gh.AcceptedError
		er    *gh.ErrorResponse
		ie    *ghinstallation.HTTPError
	)
	switch {
	case errors.As(err, &rle), errors.As(err, &abuse):
		return RateLimited
	case errors.As(err, &acc):
		return Retryable
	case errors.As(err, &er) && er.Response != nil:
		return classifyStatus(er.Response.StatusCode, er.Message)
	case errors.As(err, &ie) && ie.Response != nil:
		return classifyStatus(ie.Response.StatusCode, ie.Message)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Retryable
	}
	var (
		ne net.Error
		ue *url.Error
	)
	if errors.As(err, &ne) || errors.As(err, &ue) {
		return Retryable
	}
	return Terminal
}

func classifyStatus(code int, message string) Class {
	switch {
	case code == http.StatusNotFound || code == http.StatusGone:
		return NotFound
	case code == http.StatusTooManyRequests:
		return RateLimited
	case code == http.StatusForbidden && strings.Contains(strings.ToLower(message), "rate limit"):
		return RateLimited
	case code >= 500 && code != http.StatusNotImplemented:
		return Retryable
	}
	return Terminal
}

// OutcomeOf is Classify in the report's vocabulary (report.Outcome), with the time a rate limit
// lifts: a rate limit is deferred until its reset (the transport's RateLimitedError, or
// x-ratelimit-reset on GitHub's answer); 5xx, network errors and a 404 are retryable; 401 and
// 403 (credentials, the App's permissions) and a read-only client's refusal need a human; a 422
// is invalid input; anything else is retried.
func OutcomeOf(err error) report.Outcome {
	switch Classify(err) {
	case OK:
		return report.Done
	case RateLimited:
		return limitOutcome(err)
	case Retryable:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonInterrupted}
		}
		return report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonUnavailable}
	case NotFound:
		return report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonNotFound}
	}
	if errors.Is(err, ErrReadOnly) {
		return report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden}
	}
	switch resp := responseOf(err); {
	case resp == nil:
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		return report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden}
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonRejected}
	}
	return report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError}
}

// limitOutcome is a rate limit's outcome: deferred until the time the transport or GitHub named
// (zero when neither did).
func limitOutcome(err error) report.Outcome {
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return rl.Outcome()
	}
	o := report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonRateLimited}
	var rle *gh.RateLimitError
	if errors.As(err, &rle) && !rle.Rate.Reset.IsZero() {
		o.RetryAt = rle.Rate.Reset.Time
	} else if resp := responseOf(err); resp != nil {
		if reset, perr := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); perr == nil && resp.Header.Get("X-RateLimit-Remaining") == "0" {
			o.RetryAt = time.Unix(reset, 0).UTC()
		}
	}
	return o
}

// responseOf is the HTTP response a go-github or ghinstallation error carries, nil when none.
func responseOf(err error) *http.Response {
	var (
		er  *gh.ErrorResponse
		ie  *ghinstallation.HTTPError
		rle *gh.RateLimitError
		ae  *gh.AbuseRateLimitError
	)
	switch {
	case errors.As(err, &er):
		return er.Response
	case errors.As(err, &rle):
		return rle.Response
	case errors.As(err, &ae):
		return ae.Response
	case errors.As(err, &ie):
		return ie.Response
	}
	return nil
}

// RedactURL returns raw with any userinfo and credential-bearing query parameters replaced, for
// logs and error messages. Unparseable input is reduced to its scheme and host when possible.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Keep nothing that might be a credential: cut everything before the last '@'.
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "REDACTED@" + raw[i+1:]
		}
		return raw
	}
	return redact(u)
}

func redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			switch strings.ToLower(k) {
			case "access_token", "token", "client_secret", "jwt", "private_key", "code", "state", "sig":
				q.Set(k, "REDACTED")
			}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}
