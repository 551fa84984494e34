package report

import (
	"context"
	"errors"
	"time"
)

// Class is what a repo's result asks of whoever acts on it next, in the manner of Flux's
// Ready / Waiting{RequeueAfter} / Generic / Stalling: nothing (done), nothing until a known time
// (deferred), another try (retryable), a person (needs-human), or a fix to the input
// (invalid-input). It is the one field the front ends read: the CLI's and the Action's exit
// code (ExitCode), a check run's conclusion (CheckConclusion), the status page's badge (Badge),
// and the service's requeue time (Outcome.RetryAt, EarliestRetry).
type Class string

// The classes of a result, from the least to the most urgent (see Worst).
const (
	// ClassDone: the run did what it set out to do on the repo (a plan: decided it).
	ClassDone Class = "done"
	// ClassDeferred: the repo proceeds by itself, at Outcome.RetryAt when that is known (a
	// rate limit's reset, the write budget's next slot, a rollout soak's end), else on the
	// event that unblocks it (a merge, Flux's status).
	ClassDeferred Class = "deferred"
	// ClassRetryable: the attempt failed for a reason that may pass (GitHub unavailable, a
	// network error, an interrupted run): try again with backoff.
	ClassRetryable Class = "retryable"
	// ClassNeedsHuman: fleetbot will not go on until a person acts (a commit on the bot
	// branch fleetbot did not make, a permission GitHub refuses).
	ClassNeedsHuman Class = "needs-human"
	// ClassInvalidInput: the input is wrong (the control repo, or a request GitHub rejects as
	// invalid): the same input fails the same way until it is fixed.
	ClassInvalidInput Class = "invalid-input"
)

// Classes lists every class from the least to the most urgent: a run is as urgent as its most
// urgent repo (Worst), and the order keeps ExitCode and CheckConclusion of the worst class the
// most urgent of the repos'.
var Classes = []Class{ClassDone, ClassDeferred, ClassRetryable, ClassNeedsHuman, ClassInvalidInput}

// Machine reasons of an Outcome: short, stable strings a script or a metric may match.
const (
	// ReasonRateLimited: a GitHub rate limit (primary or secondary) lifts at RetryAt.
	ReasonRateLimited = "RateLimited"
	// ReasonBudgetExhausted: fleetbot's own write budget has room for the repo at RetryAt.
	ReasonBudgetExhausted = "BudgetExhausted"
	// ReasonHeldByRollout: the repo's change waits for its rollout wave.
	ReasonHeldByRollout = "HeldByRollout"
	// ReasonHumanCommitOnBranch: someone else pushed to fleetbot's branch; fleetbot no longer
	// updates the pull request.
	ReasonHumanCommitOnBranch = "HumanCommitOnBranch"
	// ReasonRefMoved: a branch fleetbot was moving is no longer at the head it read (another
	// writer moved it since); nothing was written, and the repo is planned again from a fresh
	// snapshot.
	ReasonRefMoved = "RefMoved"
	// ReasonInvalidControlRepo: the control repo does not load: validation or render problems,
	// each at its file:line (control.Issues).
	ReasonInvalidControlRepo = "InvalidControlRepo"
	// ReasonTeamNotFound: the control repo names a team the organization does not have.
	ReasonTeamNotFound = "TeamNotFound"
	// ReasonTooManyRemovals: the run would remove more target repos (or grants) than
	// spec.maxRemovals (spec.access.maxAccessRemovals) allows; nothing was written.
	ReasonTooManyRemovals = "TooManyRemovals"
	// ReasonDefaultBranchMissing: the repo has branches, but not the configured default.
	ReasonDefaultBranchMissing = "DefaultBranchMissing"
	// ReasonUnmanagedPath: a rendered file is not a path fleetbot manages in its kind of repo
	// (or a scaffold is one).
	ReasonUnmanagedPath = "UnmanagedPath"
	// ReasonArchived: the repo is archived; fleetbot leaves it alone.
	ReasonArchived = "Archived"
	// ReasonForbidden: GitHub refuses fleetbot the request (401, 403: credentials, the App's
	// permissions, a read-only client).
	ReasonForbidden = "Forbidden"
	// ReasonRejected: GitHub rejects the request as invalid (422).
	ReasonRejected = "Rejected"
	// ReasonUnavailable: GitHub answered 5xx, or did not answer.
	ReasonUnavailable = "Unavailable"
	// ReasonUnreachable: the forge of a run's target repos could not be opened (the App's
	// installation, a token): nothing was read or written; the next event or resync tries again.
	ReasonUnreachable = "Unreachable"
	// ReasonNotFound: an object the run expected (a branch, a pull request) is gone.
	ReasonNotFound = "NotFound"
	// ReasonInterrupted: the run was cancelled or timed out before it finished the repo.
	ReasonInterrupted = "Interrupted"
	// ReasonError: an error that says nothing of its class (retried).
	ReasonError = "Error"
)

// Outcome is a result's class with its machine reason and, when known, the time to retry it.
type Outcome struct {
	// Class is done, deferred, retryable, needs-human or invalid-input.
	Class Class `json:"class"`
	// Reason is the machine reason: a short stable word such as RateLimited,
	// BudgetExhausted, HeldByRollout or HumanCommitOnBranch ("" when done).
	Reason string `json:"reason,omitempty"`
	// RetryAt is when the result may change by time alone (a rate limit's reset, the write
	// budget's next slot, a rollout's soak ending), in UTC; absent when unknown.
	RetryAt time.Time `json:"retryAt,omitzero"`
}

// Done is the outcome of a result that needs nothing more.
var Done = Outcome{Class: ClassDone}

// Error is an error that carries its Outcome, so that it keeps its class and retry time on its
// way from the forge that met it to the front end that acts on it. Classify makes one; errors.As
// finds it through any wrapping; ClassOf reads it.
type Error struct {
	// Err is the error itself; Error() is its message.
	Err     error
	outcome Outcome
}

// Error implements error with the wrapped error's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Outcome implements Classifier.
func (e *Error) Outcome() Outcome { return e.outcome }

// Classify returns err carrying the outcome o (nil for a nil err).
func Classify(err error, o Outcome) error {
	if err == nil {
		return nil
	}
	return &Error{Err: err, outcome: o}
}

// Classifier is an error that knows its own outcome: an Error, or an adapter's own error type
// (the GitHub forge's errors know their status code and rate-limit headers). ClassOf asks the
// outermost one of an error's chain.
type Classifier interface {
	error
	// Outcome is the error's class, reason and retry time.
	Outcome() Outcome
}

// ClassOf is the outcome err carries: Done for nil; that of the outermost Classifier in its
// chain; ClassRetryable with ReasonInterrupted for a cancelled or timed-out context; else
// ClassRetryable with ReasonError, since an error that says nothing of its class may pass.
func ClassOf(err error) Outcome {
	if err == nil {
		return Done
	}
	if c := Classifier(nil); errors.As(err, &c) && c.Outcome().Class != "" {
		return c.Outcome()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Outcome{Class: ClassRetryable, Reason: ReasonInterrupted}
	}
	return Outcome{Class: ClassRetryable, Reason: ReasonError}
}

// rank orders classes by urgency for Worst.
func (c Class) rank() int {
	for i, x := range Classes {
		if x == c {
			return i
		}
	}
	return 0
}

// Worst is the most urgent of the classes (ClassDone for none): the class of a run, whose
// exit code and check conclusion are those of its most urgent repo.
func Worst(classes ...Class) Class {
	w := ClassDone
	for _, c := range classes {
		if c.rank() > w.rank() {
			w = c
		}
	}
	return w
}

// Exit codes of the CLI and the Action (DESIGN §7), as Class.ExitCode gives them.
const (
	ExitDone    = 0
	ExitError   = 1
	ExitPending = 2
	ExitBlocked = 3
)

// ExitCode is the detailed exit code of a run whose most urgent result has this class: 0
// done, 2 deferred (left for a later run), 1 retryable or invalid-input (an error), 3
// needs-human. A plan's "changes pending" (2) is not a class: see reconcile's Report.ExitCode.
func (c Class) ExitCode() int {
	switch c {
	case ClassDeferred:
		return ExitPending
	case ClassRetryable, ClassInvalidInput:
		return ExitError
	case ClassNeedsHuman:
		return ExitBlocked
	}
	return ExitDone
}

// Check run conclusions (GitHub's check run "conclusion") that CheckConclusion gives.
const (
	ConclusionSuccess = "success"
	ConclusionNeutral = "neutral"
	ConclusionFailure = "failure"
)

// CheckConclusion is the conclusion of a check run (serve's plan of a control-repo pull
// request) whose most urgent repo has this class: success when every repo was decided or
// proceeds by itself (done, deferred), neutral when a repo needs another try or a person
// (retryable, needs-human: nothing is wrong with the change), failure when the input is
// invalid.
func (c Class) CheckConclusion() string {
	switch c {
	case ClassRetryable, ClassNeedsHuman:
		return ConclusionNeutral
	case ClassInvalidInput:
		return ConclusionFailure
	}
	return ConclusionSuccess
}

// Badge is the state the status page shows for a repo of this class ("deferred", "failed",
// "blocked"), or "" for done, whose state follows from its pull-request action.
func (c Class) Badge() string {
	switch c {
	case ClassDeferred:
		return "deferred"
	case ClassRetryable, ClassInvalidInput:
		return "failed"
	case ClassNeedsHuman:
		return "blocked"
	}
	return ""
}

// EarliestRetry is the earliest known RetryAt of the outcomes (zero when none is known): when a
// queue should run a repo, or a run, again for what time alone unblocks.
func EarliestRetry(outcomes ...Outcome) time.Time {
	var at time.Time
	for _, o := range outcomes {
		if !o.RetryAt.IsZero() && (at.IsZero() || o.RetryAt.Before(at)) {
			at = o.RetryAt
		}
	}
	return at
}
