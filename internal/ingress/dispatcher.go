package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// DefaultMaxBody caps a delivery's body at GitHub's own cap, 25 MB: a push of many commits
// or a large repository event is legal and must not be refused. What unauthenticated clients
// can make the service buffer is bounded by DefaultMaxUnverified bodies at once.
const DefaultMaxBody = 25 << 20

// DefaultMaxUnverified bounds the deliveries being read and verified at once: bodies are
// buffered before the signature can be checked, so this (times MaxBody) is the memory an
// unauthenticated client can hold. GitHub's deliveries take milliseconds; beyond it the answer
// is 503: the delivery fails (GitHub does not redeliver it by itself; it stays in the App's
// delivery log, from which serve asks for it again) and the next resync catches up.
const DefaultMaxUnverified = 8

// ErrBadPayload is wrapped by handlers for a payload they cannot decode
// (400: GitHub would not send it).
var ErrBadPayload = errors.New("bad webhook payload")

// Delivery is one webhook delivery whose signature checked out.
type Delivery struct {
	// ID is X-GitHub-Delivery, Event is X-GitHub-Event.
	ID, Event string
	// Payload is the raw JSON body.
	Payload []byte
	// Received is when its headers were read.
	Received time.Time
}

// Handler handles the deliveries of some event types: it decides quickly
// whether there is work and queues it, and returns the outcome for the
// metrics (metrics.OutcomeQueued, OutcomeCoalesced or OutcomeIgnored). Do
// the work in a job, not in Handle: GitHub expects an answer within ten
// seconds, and fleetbot answers within milliseconds.
type Handler interface {
	// Handles lists the X-GitHub-Event values this handler takes.
	Handles() []string
	// Handle queues the work for one delivery.
	Handle(ctx context.Context, d Delivery) (outcome string, err error)
}

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Secret is the webhook secret; deliveries not signed with it are 401.
	Secret []byte
	// MaxBody caps the body (DefaultMaxBody if <= 0); a larger one is 413.
	MaxBody int64
	// DedupeSize is how many delivery ids are remembered (DefaultDedupeSize if <= 0).
	DedupeSize int
	// MaxUnverified bounds deliveries read and verified at once (DefaultMaxUnverified if <= 0).
	MaxUnverified int
	// Logger receives one line per delivery; nil discards.
	Logger *slog.Logger
	// Metrics counts deliveries by event and outcome; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Dispatcher is the POST /webhook handler: it caps the body, verifies the
// signature before parsing anything, drops duplicate deliveries, routes each
// event to its Handler and answers at once: 202 with the outcome, 202 for
// events nobody handles, 200 for a duplicate, 401 for a bad signature, 413
// for an oversized body, 503 when the queue is full.
type Dispatcher struct {
	cfg      DispatcherConfig
	log      *slog.Logger
	handlers map[string]Handler
	seen     *seenSet
	// unverified holds a slot per delivery being read and verified; batches the one slot of
	// the front's batch being handled (serve --job-process).
	unverified chan struct{}
	batches    chan struct{}
	// batchKey is BatchKey(Secret), derived once.
	batchKey []byte
}

// NewDispatcher returns a Dispatcher routing to handlers; two handlers for
// one event type are an error.
func NewDispatcher(cfg DispatcherConfig, handlers ...Handler) (*Dispatcher, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("webhook dispatcher: no webhook secret; every delivery would be refused")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxUnverified <= 0 {
		cfg.MaxUnverified = DefaultMaxUnverified
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, log: log, handlers: map[string]Handler{}, seen: newSeenSet(cfg.DedupeSize),
		unverified: make(chan struct{}, cfg.MaxUnverified), batches: make(chan struct{}, 1), batchKey: BatchKey(cfg.Secret)}
	for _, h := range handlers {
		for _, ev := range h.Handles() {
			if _, dup := d.handlers[ev]; dup {
				return nil, fmt.Errorf("webhook dispatcher: two handlers for %q events", ev)
			}
			d.handlers[ev] = h
		}
	}
	return d, nil
}

// ServeHTTP handles one delivery.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := d.cfg.Now()
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	status, outcome, msg := d.serve(r, start, event, id)
	writeAnswer(w, status, outcome, msg)
	d.cfg.Metrics.Delivery(event, outcome)
	d.cfg.Metrics.Ack(d.cfg.Now().Sub(start))
	level := slog.LevelInfo
	if status >= 400 {
		level = slog.LevelWarn
	}
	// Nothing is formatted for a line the level drops (serve logs warnings by default).
	if d.log.Enabled(r.Context(), level) {
		d.log.Log(r.Context(), level, "webhook delivery", append(deliveryAttrs(id, event), "status", status, "outcome", outcome, "message", msg)...)
	}
}

// answer is the JSON body of every answer (fields in the order a map's keys were encoded).
type answer struct {
	Message string `json:"message"`
	Outcome string `json:"outcome"`
}

// writeAnswer writes the answer to a delivery: status, and the outcome and message as JSON.
func writeAnswer(w http.ResponseWriter, status int, outcome, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer{Message: msg, Outcome: outcome})
}

// deliveryAttrs are the log attributes naming a delivery. Headers are the sender's,
// authenticated or not: logged only bounded.
func deliveryAttrs(id, event string) []any {
	return []any{"delivery", bounded(id), "event", metrics.EventLabel(event)}
}

func (d *Dispatcher) serve(r *http.Request, start time.Time, event, id string) (int, string, string) {
	body, status, outcome, msg := readVerified(r, d.cfg.Secret, d.cfg.MaxBody, d.unverified)
	if status != 0 {
		return status, outcome, msg
	}
	status, outcome, msg = d.dispatch(r.Context(), start, event, id, body)
	if outcome == metrics.OutcomeQueueFull {
		d.log.Warn("queue full; delivery refused, the next resync catches up", deliveryAttrs(id, event)...)
	}
	return status, outcome, msg
}

// dispatch routes one verified delivery to its handler: the part of an answer that needs the
// queue, shared by POST /webhook and the batches of serve's front.
func (d *Dispatcher) dispatch(ctx context.Context, start time.Time, event, id string, body []byte) (int, string, string) {
	if status, outcome, msg := answerWithoutHandler(event); status != 0 {
		return status, outcome, msg
	}
	h, ok := d.handlers[event]
	if !ok {
		return http.StatusAccepted, metrics.OutcomeUnhandled, "event not handled"
	}
	if id != "" && !d.seen.add(id) {
		return http.StatusOK, metrics.OutcomeDuplicate, "delivery already received"
	}
	// The job outlives the request: handlers queue with their own context.
	outcome, err := h.Handle(context.WithoutCancel(ctx), Delivery{ID: id, Event: event, Payload: body, Received: start})
	switch {
	case err == nil:
		return http.StatusAccepted, outcome, ""
	case errors.Is(err, jobqueue.ErrFull):
		d.seen.forget(id)
		return http.StatusServiceUnavailable, metrics.OutcomeQueueFull, err.Error()
	case errors.Is(err, ErrBadPayload):
		return http.StatusBadRequest, metrics.OutcomeBadRequest, err.Error()
	default:
		d.seen.forget(id)
		return http.StatusInternalServerError, "error", err.Error()
	}
}

// Handled reports whether the delivery id (X-GitHub-Delivery, an event's GUID) was received
// and acknowledged by this process (one of its recent DedupeSize ids): serve does not ask
// GitHub to redeliver it even when GitHub's delivery log recorded a failure (an answer GitHub
// timed out on). A delivery refused (queue full, an error) is not handled: its redelivery is
// taken, not dropped as a duplicate.
func (d *Dispatcher) Handled(id string) bool { return id != "" && d.seen.contains(id) }

// answerWithoutHandler answers the verified deliveries no handler sees: no event (400) and a
// ping (200); status 0 for the others.
func answerWithoutHandler(event string) (status int, outcome, msg string) {
	switch event {
	case "":
		return http.StatusBadRequest, metrics.OutcomeBadRequest, "no X-GitHub-Event header"
	case "ping":
		return http.StatusOK, metrics.OutcomeIgnored, "pong"
	}
	return 0, "", ""
}

// readVerified reads a delivery's body (POST only, at most maxBody bytes) and checks its
// signature against secret, holding one of the unverified slots meanwhile (503 when none is
// free): a non-zero status is the refusal.
func readVerified(r *http.Request, secret []byte, maxBody int64, unverified chan struct{}) (body []byte, status int, outcome, msg string) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, metrics.OutcomeBadRequest, "POST only"
	}
	if r.ContentLength > maxBody {
		return nil, http.StatusRequestEntityTooLarge, metrics.OutcomeTooLarge, fmt.Sprintf("body over %d bytes", maxBody)
	}
	select {
	case unverified <- struct{}{}:
		defer func() { <-unverified }()
	default:
		return nil, http.StatusServiceUnavailable, metrics.OutcomeBusy, "too many deliveries at once; retry"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	switch {
	case err != nil:
		return nil, http.StatusBadRequest, metrics.OutcomeBadRequest, "reading the body failed"
	case int64(len(body)) > maxBody:
		return nil, http.StatusRequestEntityTooLarge, metrics.OutcomeTooLarge, fmt.Sprintf("body over %d bytes", maxBody)
	}
	if err := VerifySignature(secret, body, r.Header.Get(SignatureHeader)); err != nil {
		return nil, http.StatusUnauthorized, metrics.OutcomeBadSignature, err.Error()
	}
	return body, 0, "", ""
}

// bounded returns a header value for a log line: as it is when short and plain (a delivery id
// is a UUID), else a placeholder.
func bounded(v string) string {
	if len(v) > 64 {
		return "(invalid)"
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.') {
			return "(invalid)"
		}
	}
	return v
}
