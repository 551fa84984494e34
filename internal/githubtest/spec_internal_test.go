package githubtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// recorder is a testing.TB that records Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// Without GitHub's description the conformance check never passes silently: the test fails
// saying what to run.
func TestSpecMissingFails(t *testing.T) {
	t.Parallel()
	missing := func() (*restspec.Description, error) { return nil, errors.New("no such file") }
	r := &recorder{TB: t}
	specOptionFrom(r, missing)
	if r.fatal == "" {
		t.Fatal("want a test failure")
	}
	t.Log(r.fatal)
}
