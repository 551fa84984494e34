package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// DefaultResyncInterval is how often the whole fleet is reconciled even
// without a webhook, to catch deliveries GitHub never made or that were
// refused.
const DefaultResyncInterval = 10 * time.Minute

// errStarting is the readiness of a server that has not connected yet.
var errStarting = errors.New("starting: GitHub App not reached yet")

// Server is the HTTP face of fleetbot serve:
//
//	POST /webhook   the Dispatcher (503 until the service is connected)
//	GET  /healthz   200 while the process serves HTTP
//	GET  /readyz    200 once GitHub was reached and the first resync queued
//	GET  /metrics   Prometheus exposition
type Server struct {
	metrics    *metrics.Metrics
	dispatcher atomic.Pointer[Dispatcher]
	notReady   atomic.Pointer[error] // nil: ready
	// batches: the job process of serve --job-process, which also takes the front's batches.
	batches bool
}

// NewServer returns a Server that is not ready and refuses deliveries until
// SetDispatcher and SetReady(nil) are called.
func NewServer(m *metrics.Metrics) *Server {
	s := &Server{metrics: m}
	err := errStarting
	s.notReady.Store(&err)
	return s
}

// AcceptBatches makes Handler route POST BatchPath (the batches of serve's front) to the
// dispatcher too. Only the job process of serve --job-process, listening on loopback, does.
func (s *Server) AcceptBatches() { s.batches = true }

// SetDispatcher starts routing deliveries to d.
func (s *Server) SetDispatcher(d *Dispatcher) { s.dispatcher.Store(d) }

// SetReady sets readiness: nil is ready, an error says why not.
func (s *Server) SetReady(err error) {
	if err == nil {
		s.notReady.Store(nil)
		return
	}
	s.notReady.Store(&err)
}

// Ready returns nil when ready, or why not.
func (s *Server) Ready() error {
	if p := s.notReady.Load(); p != nil {
		return *p
	}
	return nil
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhook", func(w http.ResponseWriter, r *http.Request) {
		d := s.dispatcher.Load()
		if d == nil {
			s.metrics.Delivery(r.Header.Get("X-GitHub-Event"), metrics.OutcomeNotReady) // bounded by Delivery
			http.Error(w, "fleetbot is starting", http.StatusServiceUnavailable)
			return
		}
		d.ServeHTTP(w, r)
	})
	if s.batches {
		mux.HandleFunc("POST "+BatchPath, func(w http.ResponseWriter, r *http.Request) {
			d := s.dispatcher.Load()
			if d == nil {
				http.Error(w, "fleetbot is starting", http.StatusServiceUnavailable)
				return
			}
			d.ServeBatch(w, r)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", s.metrics.Handler())
	return mux
}

// Resync queues an apply of the whole fleet at once and then every
// Interval: the safety net for missed or refused deliveries. State lives in
// git and GitHub, so a restarted service loses nothing: its first resync
// finds whatever is left to do.
type Resync struct {
	Queue *Queue
	// Control is the control repo "owner/name", for the jobs' logs.
	Control string
	// Interval defaults to DefaultResyncInterval.
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Recover, when set, returns the jobs a resync adds to its apply: the checks of the
	// control pull requests whose head has no completed check run (Service.RecoverChecks).
	Recover func(ctx context.Context) ([]Job, error)
}

// Run queues resyncs until ctx is done. scheduled, if not nil, is called
// once the first resync is queued (readiness).
func (r *Resync) Run(ctx context.Context, scheduled func()) {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultResyncInterval
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	first := true
	for {
		_, err := r.Queue.Push(Job{Kind: KindApply, Repo: r.Control, Reason: "resync", Queued: now()})
		switch {
		case err != nil:
			log.Warn("resync not queued", "err", err)
		case first:
			first = false
			log.Info("first resync queued", "interval", interval)
			if scheduled != nil {
				scheduled()
			}
		}
		r.recover(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recover queues the jobs Recover finds (nothing without it); what it could not read is logged
// and asked again at the next resync.
func (r *Resync) recover(ctx context.Context, log *slog.Logger) {
	if r.Recover == nil {
		return
	}
	jobs, err := r.Recover(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("resync: recovering control pull request checks; the next resync tries again", "err", err)
	}
	for _, j := range jobs {
		if _, err := r.Queue.Push(j); err != nil {
			log.Warn("resync: check not queued; the next resync tries again", "repo", j.Repo, "pr", j.PR, "err", err)
		}
	}
}
