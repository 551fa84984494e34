package main

import (
	"context"
	"fmt"
)

// untilDone runs work, which writes nothing, and returns its result, or, when ctx is done
// first (SIGINT or SIGTERM), returns at once with an error saying what was interrupted: a
// read-only command (check control loading and rendering two trees of a large fleet, check
// workspace's kustomize builds) then ends within the signal's wait whatever phase it is in.
// The work goes on in its goroutine only until the process exits.
func untilDone[T any](ctx context.Context, what string, work func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%s interrupted (%w): nothing was written", what, context.Cause(ctx))
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := work()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return zero, fmt.Errorf("%s interrupted (%w): nothing was written", what, context.Cause(ctx))
	}
}
