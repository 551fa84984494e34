package serve

import (
	"context"
	"log/slog"
	"sync"
	"time"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
)

// GitHub's delivery log is serve's inbox. GitHub does not redeliver a failed delivery by itself
// ("GitHub does not automatically redeliver failed deliveries"); it keeps every attempt in the
// App's delivery log (3 days on GitHub.com, 7 on GitHub Enterprise Server) and redelivers one
// when the App asks, as a new attempt with the same GUID. So serve reads the log at start and
// every RedeliverInterval and asks for the events whose latest attempt failed (serve was down,
// refused them with 503, or GitHub timed out) and that it did not handle: the pass GitHub's own
// guide scripts.
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries,
// https://docs.github.com/webhooks/using-webhooks/automatically-redelivering-failed-deliveries-for-a-github-app-webhook,
// https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook,
// https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook

// DefaultRedeliverInterval is how often serve reads the App's delivery log for failed
// deliveries to redeliver (and once at start).
const DefaultRedeliverInterval = 5 * time.Minute

// logLag is how far back of the previous pass a pass reads again: an attempt made just before
// a pass may reach the log after it.
const logLag = time.Minute

// deliveryLog is what the inbox needs of the App (ghforge.App).
type deliveryLog interface {
	RedeliverFailed(ctx context.Context, q ghforge.RedeliveryQuery) (ghforge.RedeliveryPass, error)
}

// inbox runs the passes over the delivery log: it remembers where the last complete pass read
// from and the GUIDs it asked for (handled until the pass after, when their new attempt is in
// the log).
type inbox struct {
	log      deliveryLog
	handled  func(guid string) bool
	now      func() time.Time
	interval time.Duration
	max      int
	logger   *slog.Logger
	// passed, when set, is called after each pass (tests wait on it).
	passed func(ghforge.RedeliveryPass, error)

	mu    sync.Mutex
	since time.Time
	asked map[string]bool // GUIDs asked for by the previous pass
}

// run does a pass at once and then every interval (wall time: the passes are not part of the
// service's injected clock, whose timers are the rollout's wake-ups) until ctx is done.
func (in *inbox) run(ctx context.Context) {
	t := time.NewTicker(in.interval)
	defer t.Stop()
	for {
		in.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass reads the log since the last complete pass (within GitHub's retention: zero reads all it
// keeps) and asks for the failed deliveries serve did not handle, at most max (oldest first,
// the nearest to leaving the log). A pass that stopped early (an error, its page bound, its
// redelivery bound) does not move the start of the next one, so nothing is skipped.
func (in *inbox) pass(ctx context.Context) {
	in.mu.Lock()
	since, asked := in.since, in.asked
	in.mu.Unlock()
	now := in.now()
	p, err := in.log.RedeliverFailed(ctx, ghforge.RedeliveryQuery{
		Since: since, Now: now, Max: in.max,
		Handled: func(guid string) bool { return asked[guid] || in.handled(guid) },
	})
	next := map[string]bool{}
	for _, d := range p.Asked {
		next[d.GUID] = true
	}
	in.mu.Lock()
	in.asked = next
	if err == nil && p.Complete && len(p.Asked) < in.limit() {
		in.since = now.Add(-logLag)
	}
	in.mu.Unlock()
	switch {
	case err != nil && ctx.Err() == nil:
		in.logger.Warn("reading the App's webhook delivery log; the next pass tries again", "err", err, "asked", len(p.Asked))
	case len(p.Asked) > 0 || len(p.Gone) > 0 || !p.Complete:
		in.logger.Info("asked GitHub to redeliver the failed webhook deliveries", "listed", p.Listed, "asked", len(p.Asked),
			"gone", len(p.Gone), "complete", p.Complete)
	}
	if in.passed != nil {
		in.passed(p, err)
	}
}

func (in *inbox) limit() int {
	if in.max > 0 {
		return in.max
	}
	return ghforge.DefaultMaxRedeliveries
}
