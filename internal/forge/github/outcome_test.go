package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestOutcomeOf: every class Classify finds becomes the report's class and reason, with the
// time a rate limit lifts when the transport or GitHub named it; and the forge's wrappers keep
// it on the way to reconcile.
func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	reset := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	resp := func(code int, header ...string) *http.Response {
		req, _ := http.NewRequest("GET", "https://api.github.com/repos/o/r", nil)
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: code, Request: req, Header: h}
	}
	deferred := func(reason string, at time.Time) report.Outcome {
		return report.Outcome{Class: report.ClassDeferred, Reason: reason, RetryAt: at}
	}
	for _, tc := range []struct {
		name string
		err  error
		want report.Outcome
	}{
		{"nil", nil, report.Done},
		{"our rate limit", &RateLimitedError{Reason: "primary", Reset: reset}, deferred(report.ReasonRateLimited, reset)},
		{"our content budget", &RateLimitedError{Reason: reasonContentBudget, Reset: reset}, deferred(report.ReasonBudgetExhausted, reset)},
		{"go-github RateLimitError", &gh.RateLimitError{Response: resp(403), Rate: gh.Rate{Reset: gh.Timestamp{Time: reset}}}, deferred(report.ReasonRateLimited, reset)},
		{"429 with x-ratelimit-reset", &gh.ErrorResponse{Response: resp(429, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))},
			deferred(report.ReasonRateLimited, reset)},
		{"secondary limit naming no time", &gh.AbuseRateLimitError{Response: resp(403)}, deferred(report.ReasonRateLimited, time.Time{})},
		{"403 permissions", &gh.ErrorResponse{Response: resp(403), Message: "Resource not accessible by integration"},
			report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden}},
		{"401", &gh.ErrorResponse{Response: resp(401)}, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden}},
		{"read-only client", fmt.Errorf("x: %w", ErrReadOnly), report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden}},
		{"422", &gh.ErrorResponse{Response: resp(422)}, report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonRejected}},
		{"502", &gh.ErrorResponse{Response: resp(502)}, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonUnavailable}},
		{"404", &gh.ErrorResponse{Response: resp(404)}, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonNotFound}},
		{"deadline", context.DeadlineExceeded, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonInterrupted}},
		{"501", &gh.ErrorResponse{Response: resp(501)}, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError}},
	} {
		assert.Equal(t, tc.want, OutcomeOf(tc.err), tc.name)
		if tc.err != nil {
			assert.Equal(t, tc.want, report.ClassOf(fmt.Errorf("reconcile: %w", Wrap(tc.err, "reading", "o/r"))), "%s, wrapped", tc.name)
		}
	}

	// errf keeps a rate limit a pr.ErrDeferred, deferred until the limit's reset.
	err := errf(&RateLimitedError{Reason: "secondary", Reset: reset}, "creating tree in", "o/r")
	assert.ErrorIs(t, err, pr.ErrDeferred)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Equal(t, deferred(report.ReasonRateLimited, reset), report.ClassOf(err))
	assert.Equal(t, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted}, report.ClassOf(fmt.Errorf("x: %w", pr.ErrDeferred)),
		"a forge that does not know when: deferred all the same")
	assert.True(t, errors.Is(errf(&gh.ErrorResponse{Response: resp(404)}, "reading", "o/r"), ErrNotFound))
}
