package ingress

import (
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

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
