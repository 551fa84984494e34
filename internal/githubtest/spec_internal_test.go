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

// Without GitHub's description the conformance check never passes silently: under CI=true the
// test fails saying what to run; elsewhere it is announced.
func TestSpecMissingFailsUnderCI(t *testing.T) {
	t.Parallel()
	missing := func() (*restspec.Description, error) { return nil, errors.New("no such file") }
	warned := 0
	warn := func() { warned++ }

	r := &recorder{TB: t}
	specOptionFrom(r, missing, true, warn)
	if r.fatal == "" || warned != 0 {
		t.Fatalf("CI=true: want a test failure, got fatal %q, %d warnings", r.fatal, warned)
	}
	t.Log(r.fatal)

	r = &recorder{TB: t}
	specOptionFrom(r, missing, false, warn)
	if r.fatal != "" || warned != 1 {
		t.Fatalf("outside CI: want one loud warning and no failure, got fatal %q, %d warnings", r.fatal, warned)
	}
}
