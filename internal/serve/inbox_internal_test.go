package serve

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
)

// memLog is an App's delivery log in memory: a pass picks with ghforge.Redeliveries, as
// App.RedeliverFailed does, over the attempts since its Since.
type memLog struct {
	mu       sync.Mutex
	attempts []ghforge.Delivery
	asked    [][]string
	queries  []ghforge.RedeliveryQuery
}

func (l *memLog) RedeliverFailed(_ context.Context, q ghforge.RedeliveryQuery) (ghforge.RedeliveryPass, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queries = append(l.queries, q)
	var in []ghforge.Delivery
	for _, d := range l.attempts {
		if !d.DeliveredAt.Before(q.Since) {
			in = append(in, d)
		}
	}
	q.Retention = ghforge.DeliveryRetentionGitHub
	pass := ghforge.RedeliveryPass{Listed: len(in), Complete: true, Asked: ghforge.Redeliveries(in, q)}
	var guids []string
	for _, d := range pass.Asked {
		guids = append(guids, d.GUID)
	}
	l.asked = append(l.asked, guids)
	return pass, nil
}

func (l *memLog) add(d ghforge.Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.ID = int64(len(l.attempts) + 1)
	l.attempts = append(l.attempts, d)
}

func (l *memLog) lastAsked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked[len(l.asked)-1]
}

// stepClock is a clock the test moves; the inbox's passes are called directly.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// TestInboxRedeliversWhatFailedWhileDown: the first pass after a start asks GitHub to redeliver
// the deliveries whose latest attempt failed (serve was down: no answer; refused: a 503), not
// the ones that succeeded, nor those serve acknowledged although GitHub recorded a failure (it
// timed out on the answer); the next pass does not ask for them again before their new attempt
// is in the log, asks again when that attempt failed too, and reads only since the last pass.
func TestInboxRedeliversWhatFailedWhileDown(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	log := &memLog{}
	handled := map[string]bool{"timed-out": true}
	in := &inbox{log: log, handled: func(g string) bool { return handled[g] }, now: clock.Now, interval: 5 * time.Minute, logger: slog.New(slog.DiscardHandler)}
	log.add(ghforge.Delivery{GUID: "down", Event: "push", DeliveredAt: t0.Add(-2 * time.Hour), Status: "failed to connect to host"})
	log.add(ghforge.Delivery{GUID: "ok", Event: "push", DeliveredAt: t0.Add(-time.Hour), StatusCode: 202, Status: "OK"})
	log.add(ghforge.Delivery{GUID: "refused", Event: "pull_request", DeliveredAt: t0.Add(-time.Hour), StatusCode: 503, Status: "Invalid HTTP Response: 503"})
	log.add(ghforge.Delivery{GUID: "timed-out", Event: "push", DeliveredAt: t0.Add(-time.Hour), Status: "timed out"})
	log.add(ghforge.Delivery{GUID: "gone", Event: "push", DeliveredAt: t0.Add(-4 * 24 * time.Hour), Status: "failed to connect to host"})
	log.add(ghforge.Delivery{GUID: "fixed", Event: "push", DeliveredAt: t0.Add(-3 * time.Hour), StatusCode: 503, Status: "Invalid HTTP Response: 503"})
	log.add(ghforge.Delivery{GUID: "fixed", Event: "push", DeliveredAt: t0.Add(-2 * time.Hour), StatusCode: 202, Status: "OK", Redelivery: true})

	ctx := context.Background()
	in.pass(ctx)
	assert.Equal(t, []string{"down", "refused"}, log.lastAsked(), "failed, not handled, within GitHub's retention, oldest first")
	assert.True(t, log.queries[0].Since.IsZero(), "the first pass reads all GitHub keeps")

	clock.now = t0.Add(5 * time.Minute)
	in.pass(ctx)
	assert.Empty(t, log.lastAsked(), "asked for already; their new attempts are not in the log yet")
	assert.Equal(t, t0.Add(-logLag), log.queries[1].Since, "reads since the last complete pass")

	// The redelivery of "down" failed again (serve down again); "refused" got through.
	log.add(ghforge.Delivery{GUID: "down", Event: "push", DeliveredAt: t0.Add(6 * time.Minute), Status: "failed to connect to host", Redelivery: true})
	log.add(ghforge.Delivery{GUID: "refused", Event: "pull_request", DeliveredAt: t0.Add(6 * time.Minute), StatusCode: 202, Status: "OK", Redelivery: true})
	clock.now = t0.Add(10 * time.Minute)
	in.pass(ctx)
	assert.Equal(t, []string{"down"}, log.lastAsked(), "a redelivery that failed is asked for again")
}

// TestInboxPassIsBounded: a pass asks for at most max deliveries, the oldest first, and does
// not move the start of the next pass, which asks for the rest.
func TestInboxPassIsBounded(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clock := &stepClock{now: t0}
	log := &memLog{}
	in := &inbox{log: log, handled: func(string) bool { return false }, now: clock.Now, interval: time.Minute, max: 2, logger: slog.New(slog.DiscardHandler)}
	for i, g := range []string{"a", "b", "c"} {
		log.add(ghforge.Delivery{GUID: g, Event: "push", DeliveredAt: t0.Add(time.Duration(i-10) * time.Minute), StatusCode: 500, Status: "Invalid HTTP Response: 500"})
	}
	in.pass(context.Background())
	assert.Equal(t, []string{"a", "b"}, log.lastAsked())
	clock.now = t0.Add(time.Minute)
	in.pass(context.Background())
	assert.Equal(t, []string{"c"}, log.lastAsked(), "the rest, from the same start")
	assert.True(t, log.queries[1].Since.IsZero())
}
