package ingress

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// BatchPath is where the job process of serve --job-process takes the front's batches (on its
// loopback listener only).
const BatchPath = "/internal/front-batch"

// BatchSignatureHeader carries the HMAC-SHA256 of a batch's body keyed with BatchKey.
const BatchSignatureHeader = "X-Fleetbot-Batch-Signature"

// Front limits: a batch carries at most frontBatchMax deliveries and, beyond its first,
// frontBatchBytes of bodies; at most frontMaxRefusals refusals wait to be reported (the rest
// are counted in the log only).
const (
	frontBatchMax    = 512
	frontBatchBytes  = 8 << 20
	frontMaxRefusals = 4096
	frontRetryMin    = 50 * time.Millisecond
	frontRetryMax    = 2 * time.Second
	// frontAckMax caps a reported acknowledgement time (the job process records it).
	frontAckMax = time.Minute
)

// Batch is what serve's front hands its job process: verified deliveries in the order they
// came, what the front refused on its own (for the delivery metrics) and how many deliveries
// it still holds.
type Batch struct {
	Deliveries []FrontDelivery `json:"deliveries,omitempty"`
	Refused    []FrontRefusal  `json:"refused,omitempty"`
	Buffered   int             `json:"buffered"`
}

// FrontDelivery is one delivery the front acknowledged, with GitHub's signature: the job
// process verifies it again.
type FrontDelivery struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	Signature string `json:"signature"`
	Body      []byte `json:"body"`
	// AckNanos is how long the front took to acknowledge it.
	AckNanos int64 `json:"ack_nanos"`
}

// FrontRefusal is a delivery the front answered without handing it on (bad signature, too
// large, ping...).
type FrontRefusal struct {
	Event    string `json:"event"`
	Outcome  string `json:"outcome"`
	AckNanos int64  `json:"ack_nanos"`
}

// BatchAnswer is the job process's answer to one delivery of a batch, as POST /webhook would
// have answered it.
type BatchAnswer struct {
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
}

// BatchKey is the key batches are signed with: derived from the webhook secret, so that no
// GitHub delivery (signed with the secret itself) is ever a valid batch.
func BatchKey(secret []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("fleetbot serve front batch v1"))
	return mac.Sum(nil)
}

// signBatch returns the BatchSignatureHeader value of body.
func signBatch(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// FrontConfig configures a Front.
type FrontConfig struct {
	// Secret is the webhook secret: deliveries not signed with it are 401, batches are signed
	// with BatchKey(Secret).
	Secret []byte
	// MaxBody caps a delivery's body (DefaultMaxBody if <= 0); MaxUnverified bounds the
	// deliveries read and verified at once (DefaultMaxUnverified if <= 0).
	MaxBody       int64
	MaxUnverified int
	// Capacity is how many acknowledged deliveries may wait for the job process
	// (jobqueue.DefaultQueueSize if <= 0); beyond it the answer is 503: the delivery fails (GitHub
	// does not redeliver it by itself; serve's pass over the App's delivery log asks for it) and
	// the next resync catches up.
	Capacity int
	// JobProcess is the base URL of the job process ("http://127.0.0.1:PORT").
	JobProcess string
	// Client posts the batches (default: a client of its own).
	Client *http.Client
	// Logger receives what goes wrong; nil discards.
	Logger *slog.Logger
	// Clock times the acknowledgements and the waits between failed forwards (default
	// WallClock).
	Clock jobqueue.Clock
}

// Front is the acknowledging half of fleetbot serve --job-process. It answers POST /webhook
// itself, the way the Dispatcher would refuse what it refuses (body cap, signature, ping, no
// event), and acknowledges a verified delivery once it holds it; Run hands what it holds to
// the job process in batches, oldest first, retrying until the job process takes each one.
// Its process runs nothing else, so no job's CPU ever delays an answer to GitHub.
type Front struct {
	cfg        FrontConfig
	log        *slog.Logger
	key        []byte
	unverified chan struct{}
	wake       chan struct{}

	mu       sync.Mutex
	held     []FrontDelivery // acknowledged, not taken by the job process yet, oldest first
	refused  []FrontRefusal
	overflow int // refusals not kept (frontMaxRefusals)
}

// NewFront returns a Front; Run forwards what it acknowledges.
func NewFront(cfg FrontConfig) (*Front, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("webhook front: no webhook secret; every delivery would be refused")
	}
	if cfg.JobProcess == "" {
		return nil, errors.New("webhook front: no job process URL")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxUnverified <= 0 {
		cfg.MaxUnverified = DefaultMaxUnverified
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = jobqueue.DefaultQueueSize
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: time.Minute}
	}
	if cfg.Clock == nil {
		cfg.Clock = jobqueue.WallClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Front{cfg: cfg, log: log, key: BatchKey(cfg.Secret), unverified: make(chan struct{}, cfg.MaxUnverified),
		wake: make(chan struct{}, 1)}, nil
}

// wait waits d on the clock, or until ctx is done.
func (f *Front) wait(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	stop := f.cfg.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// Held is how many acknowledged deliveries wait for the job process.
func (f *Front) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// ServeHTTP answers one delivery: 202 once held for the job process, 200 for a ping, and the
// Dispatcher's refusals (405, 413, 401, 400, 503 busy, 503 when Capacity deliveries wait).
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := f.cfg.Clock.Now()
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	status, outcome, msg := f.accept(r, start, event, id)
	writeAnswer(w, status, outcome, msg)
	if status >= 400 {
		f.log.Warn("webhook delivery", append(deliveryAttrs(id, event), "status", status, "outcome", outcome, "message", msg)...)
	}
}

// accept holds a verified delivery, or says why not (recording the refusal for the metrics).
func (f *Front) accept(r *http.Request, start time.Time, event, id string) (status int, outcome, msg string) {
	defer func() {
		if status != http.StatusAccepted {
			f.refuse(event, outcome, f.cfg.Clock.Now().Sub(start))
		}
	}()
	body, status, outcome, msg := readVerified(r, f.cfg.Secret, f.cfg.MaxBody, f.unverified)
	if status != 0 {
		return status, outcome, msg
	}
	if status, outcome, msg := answerWithoutHandler(event); status != 0 {
		return status, outcome, msg
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.held) >= f.cfg.Capacity {
		return http.StatusServiceUnavailable, metrics.OutcomeQueueFull, jobqueue.ErrFull.Error()
	}
	f.held = append(f.held, FrontDelivery{ID: id, Event: event, Signature: r.Header.Get(SignatureHeader), Body: body,
		AckNanos: int64(f.cfg.Clock.Now().Sub(start))})
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return http.StatusAccepted, "accepted", ""
}

// refuse records a refusal for the job process's metrics.
func (f *Front) refuse(event, outcome string, ack time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refused) >= frontMaxRefusals {
		f.overflow++
		return
	}
	f.refused = append(f.refused, FrontRefusal{Event: metrics.EventLabel(event), Outcome: outcome, AckNanos: int64(ack)})
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run hands what the front holds to the job process until ctx is done, retrying (with a
// backoff of up to two seconds) while the job process cannot take it: starting, restarting or
// its queue full.
func (f *Front) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			if f.wait(ctx, backoff) != nil {
				return
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
			if !f.pending() {
				continue // a wake whose delivery an earlier batch took
			}
		}
		// A batch under way is finished even when ctx ends meanwhile: cancelled, it would be
		// handed over again after the job process may have queued it.
		progress, err := f.forwardOnce(context.WithoutCancel(ctx))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(2*backoff, frontRetryMin), frontRetryMax)
			if backoff == frontRetryMax {
				f.log.Warn("job process not taking deliveries; retrying", "held", f.Held(), "err", err)
			}
		case !progress:
			backoff = min(max(2*backoff, frontRetryMin), frontRetryMax)
		default:
			backoff = 0
			if f.pending() {
				select {
				case f.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// Drain hands over everything the front holds, retrying until it is all taken or ctx is done,
// and returns how many deliveries are left (the job process's next resync catches up on them).
func (f *Front) Drain(ctx context.Context) int {
	backoff := frontRetryMin
	for f.pending() && ctx.Err() == nil {
		progress, err := f.forwardOnce(ctx)
		if err == nil && progress {
			backoff = frontRetryMin
			continue
		}
		if f.wait(ctx, backoff) != nil {
			break
		}
		backoff = min(2*backoff, frontRetryMax)
	}
	return f.Held()
}

// pending reports whether anything waits to be handed over.
func (f *Front) pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held) > 0 || len(f.refused) > 0
}

// forwardOnce sends one batch: the oldest held deliveries and every refusal. progress is
// whether the job process took anything (a delivery it refuses with 503 stays held, in order).
func (f *Front) forwardOnce(ctx context.Context) (progress bool, err error) {
	f.mu.Lock()
	n, size := 0, 0
	for n < len(f.held) && n < frontBatchMax && (n == 0 || size+len(f.held[n].Body) <= frontBatchBytes) {
		size += len(f.held[n].Body)
		n++
	}
	if n == 0 && len(f.refused) == 0 {
		f.mu.Unlock()
		return true, nil // nothing to hand over
	}
	b := &Batch{Deliveries: f.held[:n:n], Refused: f.refused, Buffered: len(f.held) - n}
	f.refused = nil
	overflow := f.overflow
	f.overflow = 0
	f.mu.Unlock()
	if overflow > 0 {
		f.log.Warn("webhook front: refusals not reported to the metrics", "count", overflow)
	}
	answers, err := f.post(ctx, b)
	if err != nil {
		f.mu.Lock()
		// Refusals go back ahead of newer ones; past the cap they are only counted.
		f.refused = append(b.Refused, f.refused...)
		if len(f.refused) > frontMaxRefusals {
			f.overflow += len(f.refused) - frontMaxRefusals
			f.refused = f.refused[:frontMaxRefusals]
		}
		f.mu.Unlock()
		return false, err
	}
	var retry []FrontDelivery
	for i, a := range answers {
		d := b.Deliveries[i]
		switch {
		case a.Status == http.StatusServiceUnavailable:
			retry = append(retry, d)
		case a.Status >= 400:
			// Refused for good (a payload the job process cannot decode, say): GitHub shows the
			// delivery as answered 202, so the log is where it is seen.
			f.log.Warn("job process refused a delivery", append(deliveryAttrs(d.ID, d.Event), "status", a.Status, "outcome", a.Outcome, "message", a.Message)...)
		}
	}
	f.mu.Lock()
	rest := f.held[n:]
	f.held = append(retry, rest...)
	f.mu.Unlock()
	return len(retry) < n || len(b.Refused) > 0, nil
}

// post sends b and returns one answer per delivery.
func (f *Front) post(ctx context.Context, b *Batch) ([]BatchAnswer, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.JobProcess+BatchPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(BatchSignatureHeader, signBatch(f.key, body))
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("job process answered %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var answers []BatchAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answers); err != nil {
		return nil, fmt.Errorf("job process answer: %w", err)
	}
	if len(answers) != len(b.Deliveries) {
		return nil, fmt.Errorf("job process answered %d of %d deliveries", len(answers), len(b.Deliveries))
	}
	return answers, nil
}

// ServeBatch is BatchPath in the job process: it checks the batch's signature before reading
// any of it, records the front's refusals and acknowledgement times, and dispatches each
// delivery as POST /webhook would (its GitHub signature checked again), answering per delivery.
func (d *Dispatcher) ServeBatch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// One batch at a time (the front sends one at a time): what an unauthenticated client on
	// the loopback address can make this process buffer is one batch's limit.
	select {
	case d.batches <- struct{}{}:
		defer func() { <-d.batches }()
	default:
		http.Error(w, "a batch is being handled; retry", http.StatusServiceUnavailable)
		return
	}
	// Bodies travel base64-encoded: a third larger than on the wire from GitHub.
	limit := frontBatchBytes*2 + d.cfg.MaxBody*2 + 1<<20
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case err != nil:
		http.Error(w, "reading the batch failed", http.StatusBadRequest)
		return
	case int64(len(body)) > limit:
		http.Error(w, "batch too large", http.StatusRequestEntityTooLarge)
		return
	}
	if !hmac.Equal([]byte(signBatch(d.batchKey, body)), []byte(r.Header.Get(BatchSignatureHeader))) {
		http.Error(w, "batch signature missing or invalid", http.StatusUnauthorized)
		return
	}
	var b Batch
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, "batch: "+err.Error(), http.StatusBadRequest)
		return
	}
	answers := d.dispatchBatch(r.Context(), &b)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answers)
}

// dispatchBatch records b's refusals and dispatches its deliveries in order.
func (d *Dispatcher) dispatchBatch(ctx context.Context, b *Batch) []BatchAnswer {
	d.cfg.Metrics.FrontBuffered(max(b.Buffered, 0))
	for _, rf := range b.Refused {
		d.cfg.Metrics.Delivery(rf.Event, metrics.Outcome(rf.Outcome))
		d.cfg.Metrics.Ack(frontAck(rf.AckNanos))
	}
	answers := make([]BatchAnswer, len(b.Deliveries))
	full := false
	for i, fd := range b.Deliveries {
		start := d.cfg.Now()
		var status int
		var outcome, msg string
		switch {
		case full:
			// Behind a delivery the queue had no room for: not dispatched, so that the front
			// hands them over again in their order.
			status, outcome, msg = http.StatusServiceUnavailable, metrics.OutcomeQueueFull, jobqueue.ErrFull.Error()
		case int64(len(fd.Body)) > d.cfg.MaxBody:
			status, outcome, msg = http.StatusRequestEntityTooLarge, metrics.OutcomeTooLarge, fmt.Sprintf("body over %d bytes", d.cfg.MaxBody)
		case VerifySignature(d.cfg.Secret, fd.Body, fd.Signature) != nil:
			status, outcome, msg = http.StatusUnauthorized, metrics.OutcomeBadSignature, ErrSignature.Error()
		default:
			status, outcome, msg = d.dispatch(ctx, start, fd.Event, fd.ID, fd.Body)
		}
		answers[i] = BatchAnswer{Status: status, Outcome: outcome, Message: msg}
		if status == http.StatusServiceUnavailable {
			full = true
			continue // held by the front and handed over again: counted when it is taken
		}
		d.cfg.Metrics.Delivery(fd.Event, outcome)
		d.cfg.Metrics.Ack(frontAck(fd.AckNanos))
		level := slog.LevelInfo
		if status >= 400 {
			level = slog.LevelWarn
		}
		if d.log.Enabled(ctx, level) {
			d.log.Log(ctx, level, "webhook delivery", append(deliveryAttrs(fd.ID, fd.Event), "status", status, "outcome", outcome, "message", msg, "via", "front")...)
		}
	}
	return answers
}

// frontAck bounds an acknowledgement time reported by the front.
func frontAck(n int64) time.Duration {
	return min(max(time.Duration(n), 0), frontAckMax)
}
