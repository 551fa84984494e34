package report

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// rateLimited is an adapter's own error type that knows its outcome (as the GitHub forge's do).
type rateLimited struct{ reset time.Time }

func (e rateLimited) Error() string { return "rate limited" }
func (e rateLimited) Outcome() Outcome {
	return Outcome{Class: ClassDeferred, Reason: ReasonRateLimited, RetryAt: e.reset}
}

// TestClassOf: the class an error carries survives wrapping, the outermost one wins, an
// adapter's own error type is asked, and an error that says nothing is retried.
func TestClassOf(t *testing.T) {
	reset := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	human := Classify(errors.New("commit on the branch"), Outcome{Class: ClassNeedsHuman, Reason: ReasonHumanCommitOnBranch})
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil is done", nil, Done},
		{"plain error is retried", errors.New("boom"), Outcome{Class: ClassRetryable, Reason: ReasonError}},
		{"cancelled run", fmt.Errorf("x: %w", context.Canceled), Outcome{Class: ClassRetryable, Reason: ReasonInterrupted}},
		{"timed out", fmt.Errorf("x: %w", context.DeadlineExceeded), Outcome{Class: ClassRetryable, Reason: ReasonInterrupted}},
		{"classified, wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", human)), Outcome{Class: ClassNeedsHuman, Reason: ReasonHumanCommitOnBranch}},
		{"adapter's own type", fmt.Errorf("writing: %w", rateLimited{reset}), Outcome{Class: ClassDeferred, Reason: ReasonRateLimited, RetryAt: reset}},
		{"outermost wins", Classify(rateLimited{reset}, Outcome{Class: ClassDeferred, Reason: ReasonBudgetExhausted}), Outcome{Class: ClassDeferred, Reason: ReasonBudgetExhausted}},
		{"joined: the first found", errors.Join(errors.New("x"), human), Outcome{Class: ClassNeedsHuman, Reason: ReasonHumanCommitOnBranch}},
	} {
		assert.Equal(t, tc.want, ClassOf(tc.err), tc.name)
	}
	assert.NoError(t, Classify(nil, Done), "nil stays nil")
	assert.Equal(t, "commit on the branch", human.Error(), "the message is the wrapped error's")
}

// TestClassMappings: what each front end makes of a class, and of the most urgent one of a run.
func TestClassMappings(t *testing.T) {
	for _, tc := range []struct {
		class      Class
		exit       int
		conclusion string
		badge      string
	}{
		{ClassDone, ExitDone, ConclusionSuccess, ""},
		{ClassDeferred, ExitPending, ConclusionSuccess, "deferred"},
		{ClassRetryable, ExitError, ConclusionNeutral, "failed"},
		{ClassNeedsHuman, ExitBlocked, ConclusionNeutral, "blocked"},
		{ClassInvalidInput, ExitError, ConclusionFailure, "failed"},
	} {
		assert.Equal(t, tc.exit, tc.class.ExitCode(), "exit code of %s", tc.class)
		assert.Equal(t, tc.conclusion, tc.class.CheckConclusion(), "check conclusion of %s", tc.class)
		assert.Equal(t, tc.badge, tc.class.Badge(), "badge of %s", tc.class)
	}
	assert.Equal(t, ClassDone, Worst(), "no repo")
	assert.Equal(t, ClassDeferred, Worst(ClassDone, ClassDeferred, ClassDone))
	assert.Equal(t, ClassNeedsHuman, Worst(ClassRetryable, ClassNeedsHuman, ClassDeferred), "a person before a retry")
	assert.Equal(t, ClassInvalidInput, Worst(ClassNeedsHuman, ClassInvalidInput), "a wrong input is the most urgent")
	// The worst class's conclusion is the worst of the repos' conclusions.
	severity := map[string]int{ConclusionSuccess: 0, ConclusionNeutral: 1, ConclusionFailure: 2}
	for i, a := range Classes {
		for _, b := range Classes[i:] {
			assert.GreaterOrEqual(t, severity[b.CheckConclusion()], severity[a.CheckConclusion()], "%s after %s", b, a)
		}
	}
}

// TestEarliestRetry: the time a queue requeues a run at is the earliest known retry time.
func TestEarliestRetry(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	assert.True(t, EarliestRetry().IsZero(), "nothing to wait for")
	assert.True(t, EarliestRetry(Done, Outcome{Class: ClassDeferred, Reason: ReasonHeldByRollout}).IsZero(), "unknown times are not zero o'clock")
	assert.Equal(t, t0, EarliestRetry(
		Outcome{Class: ClassDeferred, RetryAt: t0.Add(time.Hour)},
		Done,
		Outcome{Class: ClassDeferred, RetryAt: t0},
		Outcome{Class: ClassDeferred},
	))
}
