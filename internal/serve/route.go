package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/membership"
)

// ForwardedHeader marks a delivery one replica forwarded to another (its value: the sender's
// identity). The receiver handles it itself, whatever its own view says, so a delivery is never
// forwarded twice; it is signed by GitHub all the same (the body and X-Hub-Signature-256 are
// GitHub's), so the header grants nothing.
const ForwardedHeader = "X-Fleetbot-Forwarded-By"

// maxHeld and maxHeldBytes bound the deliveries a replica holds for owners it cannot reach;
// beyond, the oldest are dropped with a warning (the new owner's full apply on the membership
// change, or the resync, covers their repos).
const (
	maxHeld      = 1000
	maxHeldBytes = 64 << 20
)

// forwardTimeout bounds one forwarding request (the owner acknowledges within milliseconds).
const forwardTimeout = 5 * time.Second

// destination says where a delivery goes.
type destination int

const (
	toSelf   destination = iota // handled here
	toOwner                     // the owner of repo
	toLeader                    // the leader (control pull requests, check re-runs)
	toAll                       // every member, this one included (control pushes, installations)
)

// held is a delivery on its way to another replica.
type held struct {
	header http.Header
	body   []byte
	dest   destination
	repo   string // toOwner: the repo's name without its owner
	member string // toAll: the one peer this copy is for
	id     string // X-GitHub-Delivery, for the logs
}

// router sits in front of the webhook dispatcher of a replica on Leases: every delivery is
// acknowledged here, and one that another replica must handle is forwarded to it, signed as
// GitHub signed it, or held until a replica that should handle it is reachable.
type router struct {
	control string // the control repo, lower case "owner/name"
	secret  []byte
	maxBody int64
	view    func() membership.View
	local   http.Handler // this replica's /webhook
	client  *http.Client
	log     *slog.Logger
	// verify bounds the bodies read and verified here at once (ingress.DefaultMaxUnverified).
	verify chan struct{}

	mu   sync.Mutex
	held []held
	kick chan struct{}
}

func newRouter(control string, secret []byte, maxBody int64, view func() membership.View, local http.Handler, log *slog.Logger) *router {
	if maxBody <= 0 {
		maxBody = ingress.DefaultMaxBody
	}
	return &router{control: strings.ToLower(control), secret: secret, maxBody: maxBody, view: view, local: local, log: log,
		client: &http.Client{Timeout: forwardTimeout}, verify: make(chan struct{}, ingress.DefaultMaxUnverified), kick: make(chan struct{}, 1)}
}

// ServeHTTP routes POST /webhook. What it cannot route — not signed, too large, forwarded
// already, or this replica's own — goes to the local dispatcher, which answers as always.
func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get(ForwardedHeader) != "" {
		rt.local.ServeHTTP(w, r)
		return
	}
	select {
	case rt.verify <- struct{}{}:
		defer func() { <-rt.verify }()
	default:
		http.Error(w, "too many deliveries being verified; GitHub keeps this one in the App's delivery log", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, rt.maxBody+1))
	if err != nil || int64(len(body)) > rt.maxBody || ingress.VerifySignature(rt.secret, body, r.Header.Get(ingress.SignatureHeader)) != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		rt.local.ServeHTTP(w, r) // 400, 401 or 413 as the dispatcher says
		return
	}
	dest, repo := rt.destination(r.Header.Get("X-GitHub-Event"), body)
	h := held{header: forwardHeader(r.Header), body: body, dest: dest, repo: repo, id: r.Header.Get("X-GitHub-Delivery")}
	if dest == toAll {
		rt.hold(rt.copies(h)...)
	}
	if dest == toSelf || dest == toAll || rt.mine(h) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		rt.local.ServeHTTP(w, r)
		return
	}
	rt.hold(h)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"outcome":"forwarded"}` + "\n"))
}

// destination decides from the event and its repository who handles a delivery: control-repo
// pushes, installation changes and commit statuses (a rollout's wave) every member (each
// applies its share), control pull requests and check re-runs the leader, a target repo's
// other events its owner.
func (rt *router) destination(event string, body []byte) (destination, string) {
	switch event {
	case "installation", "installation_repositories", "status":
		// A Flux status on a cluster or workspace repo of a rollout advances the rollout: every member
		// applies its share (each one's handler ignores the statuses that are not such).
		return toAll, ""
	}
	var p struct {
		Repository *struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if json.Unmarshal(body, &p) != nil || p.Repository == nil || p.Repository.FullName == "" {
		return toSelf, "" // the dispatcher judges it
	}
	full := strings.ToLower(p.Repository.FullName)
	if full == rt.control {
		switch event {
		case "push":
			return toAll, ""
		case "pull_request", "check_run", "check_suite":
			return toLeader, ""
		}
		return toSelf, ""
	}
	_, name, _ := strings.Cut(full, "/")
	return toOwner, name
}

// copies are the copies of a delivery for every other live member.
func (rt *router) copies(h held) []held {
	v := rt.view()
	var out []held
	for _, m := range v.Members {
		if m.Identity != v.Self {
			c := h
			c.member = m.Identity
			out = append(out, c)
		}
	}
	return out
}

// mine reports whether this replica handles h under the current view.
func (rt *router) mine(h held) bool {
	v := rt.view()
	switch h.dest {
	case toOwner:
		return v.Owns(h.repo)
	case toLeader:
		return v.Leading
	}
	return false
}

// target is the member h goes to now (ok false: nobody reachable yet, or, for a copy to a
// member that left, drop is true: its share went to the others with a full apply).
func (rt *router) target(h held) (m membership.Member, ok, drop bool) {
	v := rt.view()
	switch h.dest {
	case toOwner:
		m, ok = v.Owner(h.repo)
	case toLeader:
		m, ok = v.LeaderMember()
	case toAll:
		m, ok = v.Member(h.member)
		drop = !ok
	}
	return m, ok, drop
}

func (rt *router) hold(hs ...held) {
	if len(hs) == 0 {
		return
	}
	rt.mu.Lock()
	rt.held = append(rt.held, hs...)
	size := 0
	for _, h := range rt.held {
		size += len(h.body)
	}
	over := 0
	for ; len(rt.held)-over > maxHeld || (size > maxHeldBytes && over < len(rt.held)-1); over++ {
		h := rt.held[over]
		size -= len(h.body)
		rt.log.Warn("held delivery dropped: too many held for unreachable replicas; the resync covers its repo", "delivery", h.id, "repo", h.repo)
	}
	rt.held = append(rt.held[:0], rt.held[over:]...)
	rt.mu.Unlock()
	rt.wake()
}

// wake makes Run try the held deliveries now (a delivery held, the membership changed).
func (rt *router) wake() {
	select {
	case rt.kick <- struct{}{}:
	default:
	}
}

// Run sends the held deliveries until ctx is done: at once when one is held or the membership
// changes, and again every retry while some wait.
func (rt *router) Run(ctx context.Context, retry time.Duration) {
	t := time.NewTicker(retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rt.kick:
		case <-t.C:
		}
		rt.flush(ctx)
	}
}

// flush tries every held delivery once: handled here when this replica should handle it now,
// forwarded when its replica is reachable, kept otherwise.
func (rt *router) flush(ctx context.Context) {
	rt.mu.Lock()
	pending := rt.held
	rt.held = nil
	rt.mu.Unlock()
	var keep []held
	for _, h := range pending {
		if !rt.deliver(ctx, h) {
			keep = append(keep, h)
		}
	}
	if len(keep) > 0 {
		rt.mu.Lock()
		rt.held = append(keep, rt.held...)
		rt.mu.Unlock()
	}
}

// deliver hands h to whoever handles it now; false: keep it for later.
func (rt *router) deliver(ctx context.Context, h held) bool {
	if h.dest != toAll && rt.mine(h) {
		rec := httptest.NewRecorder()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/webhook", bytes.NewReader(h.body))
		if err != nil {
			return false
		}
		req.Header = h.header.Clone()
		rt.local.ServeHTTP(rec, req)
		rt.log.Info("held delivery handed over to this replica, its owner now", "delivery", h.id, "repo", h.repo, "status", rec.Code)
		return rec.Code < 500
	}
	m, ok, drop := rt.target(h)
	if drop {
		return true
	}
	if !ok {
		return false
	}
	if err := rt.forward(ctx, m, h); err != nil {
		rt.log.Warn("forwarding a delivery failed; held until its replica answers or the membership changes", "delivery", h.id, "to", m.Identity, "err", err)
		return false
	}
	return true
}

// forward posts h to m's /webhook as GitHub sent it.
func (rt *router) forward(ctx context.Context, m membership.Member, h held) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.Address.String()+"/webhook", bytes.NewReader(h.body))
	if err != nil {
		return err
	}
	req.Header = h.header.Clone()
	req.Header.Set(ForwardedHeader, rt.view().Self)
	resp, err := rt.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s answered %s", m.Identity, resp.Status)
	}
	return nil
}

// forwardHeader keeps what the receiving dispatcher reads: GitHub's headers and the content type.
func forwardHeader(in http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"Content-Type", "X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID", "X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type", ingress.SignatureHeader, "User-Agent"} {
		if v := in.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}
