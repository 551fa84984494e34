package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/membership"
	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// events is a slog.Handler that keeps what a replica did (the membership it sees, the jobs it
// finished) and signals every record: the test waits on what the replicas did, not on time.
type events struct {
	attrs []slog.Attr
	st    *eventState
}

type eventState struct {
	mu      sync.Mutex
	members int
	jobs    []map[string]string // "job done" records: kind, repo, reason
	trail   []string            // every record, to say what happened when a wait fails
	signal  chan struct{}
}

func newEvents() *events {
	return &events{st: &eventState{signal: make(chan struct{}, 1)}}
}

func (e *events) Enabled(context.Context, slog.Level) bool { return true }

func (e *events) Handle(_ context.Context, r slog.Record) error {
	a := map[string]string{}
	for _, x := range e.attrs {
		a[x.Key] = x.Value.String()
	}
	r.Attrs(func(x slog.Attr) bool { a[x.Key] = x.Value.String(); return true })
	e.st.mu.Lock()
	e.st.trail = append(e.st.trail, fmt.Sprintf("%s %q %v", r.Level, r.Message, a))
	switch r.Message {
	case "replica membership changed":
		if a["joined"] == "true" {
			e.st.members, _ = strconv.Atoi(a["members"])
		} else {
			e.st.members = 0
		}
	case "job started", "job done":
		a["msg"], a["members_seen"] = r.Message, strconv.Itoa(e.st.members)
		e.st.jobs = append(e.st.jobs, a)
	}
	e.st.mu.Unlock()
	select {
	case e.st.signal <- struct{}{}:
	default:
	}
	return nil
}

func (e *events) WithAttrs(as []slog.Attr) slog.Handler {
	return &events{attrs: append(append([]slog.Attr{}, e.attrs...), as...), st: e.st}
}

func (e *events) WithGroup(string) slog.Handler { return e }

// waitFor re-checks cond after every record until it holds; the deadline only turns a hang
// into a failure.
func (e *events) waitFor(t *testing.T, what string, cond func(*eventState) bool) {
	t.Helper()
	hang := time.NewTimer(2 * time.Minute)
	defer hang.Stop()
	for {
		e.st.mu.Lock()
		ok := cond(e.st)
		e.st.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-e.st.signal:
		case <-hang.C:
			e.st.mu.Lock()
			trail := strings.Join(e.st.trail, "\n")
			e.st.mu.Unlock()
			t.Fatalf("never: %s; what the replica logged:\n%s", what, trail)
		}
	}
}

// jobsDone counts the finished jobs of kind whose attribute key contains value.
func (s *eventState) jobsDone(kind, key, value string) int {
	n := 0
	for _, j := range s.jobs {
		if j["msg"] == "job done" && j["kind"] == kind && strings.Contains(j[key], value) {
			n++
		}
	}
	return n
}

// appliedWith reports whether, among the job records from the from-th on, an apply job
// started while the replica saw members replicas (a push coalesced into a queued resync keeps
// the resync's reason) and one finished since.
func (s *eventState) appliedWith(members, from int) bool {
	started := false
	for _, j := range s.jobs[from:] {
		switch {
		case j["kind"] != "apply":
		case j["msg"] == "job started" && (j["members_seen"] == strconv.Itoa(members) ||
			// The membership's own resync may start before the change's log line.
			strings.Contains(j["reason"], fmt.Sprintf("membership: %d replicas", members))):
			started = true
		case j["msg"] == "job done" && started:
			return true
		}
	}
	return false
}

// replica is one serve replica on the shared fake API server.
type replica struct {
	id     string
	base   string
	ev     *events
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, gh *githubtest.Server, kube *fake.Clientset, clk *clocktesting.FakeClock, id string) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &replica{id: id, base: "http://" + ln.Addr().String(), ev: newEvents(), done: make(chan error, 1)}
	ready := make(chan struct{})
	srv, err := serve.New(serve.Config{
		Listener: ln, Control: "acme/control", Secret: []byte(secret),
		App: app.Config{Forge: app.ForgeGitHub, GitURL: gh.URL, CacheDir: t.TempDir(), Version: "test", Concurrency: 4,
			GitHub: ghforge.Config{APIURL: gh.APIURL(), AppID: gh.AppID(), PrivateKey: gh.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: time.Hour, Workers: 2, QueueSize: 100, MaxBody: ingress.DefaultMaxBody, Grace: 5 * time.Second,
		CheckName: checkrun.DefaultCheckName,
		Replicas:  &serve.Replicas{Namespace: "fleetbot", Identity: id, IP: netip.MustParseAddr("127.0.0.1"), Client: kube, Clock: clk},
		OnReady:   func() { close(ready) }, Logger: slog.New(r.ev),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- srv.Run(ctx) }()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("%s stopped before ready: %v", id, err)
	}
	// OnReady says the first resync is queued, not that the replica's Lease is written: its
	// first heartbeat runs beside the connection to GitHub. Until it joined, a step of the fake
	// clock may find no ticker of its heartbeat yet, and the others' heartbeats at that step
	// may not see its Lease; the test would then wait for a heartbeat that never comes.
	r.ev.waitFor(t, id+" joined", func(s *eventState) bool { return s.members > 0 })
	return r
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	assert.NoError(t, <-r.done, "%s's Run returned", r.id)
}

// targetRepos are the example fleet's target repo names.
func targetRepos(t *testing.T) []string {
	t.Helper()
	repo, err := control.LoadDir(exampleControl)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	var names []string
	for _, tg := range targets {
		names = append(names, tg.Repo)
	}
	return names
}

// TestReplicasShareTheFleet runs two serve replicas on one fake API server (the fake clientset)
// and the fake GitHub: both join, are ready, and together converge every target repo with one
// pull request each; a drift delivery reaching the replica that does not own the repo is
// acknowledged as forwarded and reconciled by the owner; when one replica shuts down, the other
// takes over its share at its next heartbeat and reconciles the fleet.
func TestReplicasShareTheFleet(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t)
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC))
	a := startReplica(t, gh, kube, clk, "fleetbot-a")
	defer a.stop(t)
	b := startReplica(t, gh, kube, clk, "fleetbot-b")
	stopped := false
	defer func() {
		if !stopped {
			b.stop(t)
		}
	}()
	clk.Step(membership.DefaultRenewPeriod) // a's next heartbeat: it sees b
	for _, r := range []*replica{a, b} {
		r.ev.waitFor(t, r.id+" sees two replicas", func(s *eventState) bool { return s.members == 2 })
		r.ev.waitFor(t, r.id+" reconciled its share", func(s *eventState) bool { return s.appliedWith(2, 0) })
		code, _ := get(t, r.base+"/readyz")
		assert.Equal(t, http.StatusOK, code, "%s is ready", r.id)
	}
	repos := targetRepos(t)
	for _, name := range repos {
		assert.Len(t, gh.Pulls("acme", name), 1, "%s: one pull request, by its owner", name)
	}

	// A drift on a repo b owns, delivered to a, is reconciled by b.
	two := membership.View{Self: "x", Joined: true, Members: []membership.Member{{Identity: "fleetbot-a"}, {Identity: "fleetbot-b"}}}
	var theirs string
	for _, name := range repos {
		if m, _ := two.Owner(name); m.Identity == "fleetbot-b" {
			theirs = name
			break
		}
	}
	require.NotEmpty(t, theirs, "b owns some repo")
	ev, err := gh.PushEvent("acme", theirs, "main", gh.Branch("acme", theirs, "main"))
	require.NoError(t, err)
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	m["sender"] = map[string]any{"login": "alice", "id": 4242, "type": "User"}
	body, err = json.Marshal(m)
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, deliver(t, a.base, "push", "drift-1", body, secret))
	b.ev.waitFor(t, "b reconciles the drift of "+theirs, func(s *eventState) bool { return s.jobsDone("drift", "repo", theirs) >= 1 })
	a.ev.st.mu.Lock()
	assert.Zero(t, a.ev.st.jobsDone("drift", "repo", theirs), "a left it to its owner")
	a.ev.st.mu.Unlock()

	// b shuts down: it releases its Lease, and a takes its share at its next heartbeat.
	a.ev.st.mu.Lock()
	mark := len(a.ev.st.jobs)
	a.ev.st.mu.Unlock()
	b.stop(t)
	stopped = true
	clk.Step(membership.DefaultRenewPeriod)
	a.ev.waitFor(t, "a alone", func(s *eventState) bool { return s.members == 1 })
	a.ev.waitFor(t, "a reconciled the whole fleet", func(s *eventState) bool { return s.appliedWith(1, mark) })
	for _, name := range repos {
		assert.Len(t, gh.Pulls("acme", name), 1, "%s: still one pull request", name)
	}
}
