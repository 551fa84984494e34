package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/membership"
)

const routeSecret = "route-secret"

// sink records the deliveries a replica's dispatcher got.
type sink struct {
	mu   sync.Mutex
	got  []string // X-GitHub-Delivery
	from []string // ForwardedHeader
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("X-Hub-Signature-256") != githubtest.Sign(routeSecret, body) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	s.got = append(s.got, r.Header.Get("X-GitHub-Delivery"))
	s.from = append(s.from, r.Header.Get(ForwardedHeader))
	w.WriteHeader(http.StatusAccepted)
}

func (s *sink) deliveries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// peer is another replica's HTTP face on a loopback port.
func peer(t *testing.T) (*sink, netip.AddrPort) {
	t.Helper()
	s := &sink{}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, netip.MustParseAddrPort(ts.Listener.Addr().String())
}

// unreachable is a loopback address nobody listens on.
func unreachable(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := netip.MustParseAddrPort(ln.Addr().String())
	require.NoError(t, ln.Close())
	return a
}

func post(t *testing.T, h http.Handler, event, id, body, key string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader([]byte(body)))
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(key, []byte(body)))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// repoOwnedBy finds a target repo name the member id owns in v.
func repoOwnedBy(t *testing.T, v membership.View, id string) string {
	t.Helper()
	for _, name := range []string{"cluster-a", "cluster-b", "cluster-c", "cluster-d", "cluster-e", "cluster-f", "cluster-g", "cluster-h"} {
		if m, _ := v.Owner(name); m.Identity == id {
			return name
		}
	}
	t.Fatalf("no repo owned by %s", id)
	return ""
}

// TestRouterForwardsToTheOwnerSigned: a delivery on a target repo another replica owns is
// acknowledged (202 forwarded) and reaches the owner with GitHub's body and signature, which
// verify there; one on this replica's repo, or one forwarded already, is handled here; an
// unsigned one is the local dispatcher's to refuse, and is sent nowhere.
func TestRouterForwardsToTheOwnerSigned(t *testing.T) {
	t.Parallel()
	bSink, bAddr := peer(t)
	local := &sink{}
	v := membership.View{Self: "fleetbot-a", Joined: true, Members: []membership.Member{
		{Identity: "fleetbot-a", Address: netip.MustParseAddrPort("127.0.0.1:1")}, {Identity: "fleetbot-b", Address: bAddr}}}
	rt := newRouter("acme/control", []byte(routeSecret), 0, func() membership.View { return v }, local, slog.New(slog.DiscardHandler))

	theirs, mine := repoOwnedBy(t, v, "fleetbot-b"), repoOwnedBy(t, v, "fleetbot-a")
	rec := post(t, rt, "push", "d-theirs", `{"repository":{"full_name":"acme/`+theirs+`"}}`, routeSecret)
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.JSONEq(t, `{"outcome":"forwarded"}`, rec.Body.String())
	rt.flush(context.Background())
	assert.Equal(t, []string{"d-theirs"}, bSink.deliveries(), "the owner got it, and its signature verified")
	assert.Equal(t, []string{"fleetbot-a"}, bSink.from)

	post(t, rt, "push", "d-mine", `{"repository":{"full_name":"acme/`+mine+`"}}`, routeSecret)
	post(t, rt, "push", "d-fwd", `{"repository":{"full_name":"acme/`+theirs+`"}}`, routeSecret, ForwardedHeader, "fleetbot-b")
	rec = post(t, rt, "push", "d-forged", `{"repository":{"full_name":"acme/`+theirs+`"}}`, "not-the-secret")
	assert.Equal(t, http.StatusUnauthorized, rec.Code, "the local dispatcher refuses it")
	rt.flush(context.Background())
	assert.Equal(t, []string{"d-mine", "d-fwd"}, local.deliveries())
	assert.Equal(t, []string{"d-theirs"}, bSink.deliveries(), "nothing unsigned and nothing twice reaches a peer")
}

// TestRouterHoldsUntilOwnershipChanges: a delivery whose owner cannot be reached is held (not
// lost) and, once the membership changes and this replica owns the repo, handed to its own
// dispatcher.
func TestRouterHoldsUntilOwnershipChanges(t *testing.T) {
	t.Parallel()
	local := &sink{}
	two := membership.View{Self: "fleetbot-a", Joined: true, Members: []membership.Member{
		{Identity: "fleetbot-a", Address: netip.MustParseAddrPort("127.0.0.1:1")}, {Identity: "fleetbot-b", Address: unreachable(t)}}}
	var mu sync.Mutex
	v := two
	view := func() membership.View { mu.Lock(); defer mu.Unlock(); return v }
	rt := newRouter("acme/control", []byte(routeSecret), 0, view, local, slog.New(slog.DiscardHandler))
	theirs := repoOwnedBy(t, two, "fleetbot-b")
	assert.Equal(t, http.StatusAccepted, post(t, rt, "repository", "d1", `{"repository":{"full_name":"acme/`+theirs+`"}}`, routeSecret).Code)
	rt.flush(context.Background())
	assert.Empty(t, local.deliveries())
	require.Len(t, rt.held, 1, "held while its owner is unreachable")

	mu.Lock()
	v = membership.View{Self: "fleetbot-a", Joined: true, Members: two.Members[:1]} // b left
	mu.Unlock()
	rt.flush(context.Background())
	assert.Equal(t, []string{"d1"}, local.deliveries(), "handed over to the new owner, this replica")
	assert.Empty(t, rt.held)
}

// TestRouterRoutesControlEvents: a control push, an installation change and a commit status
// reach every member (each applies its share), a control pull request the leader only; a copy for a member that left is dropped (its share
// went to the others with a full apply).
func TestRouterRoutesControlEvents(t *testing.T) {
	t.Parallel()
	bSink, bAddr := peer(t)
	cSink, cAddr := peer(t)
	local := &sink{}
	v := membership.View{Self: "fleetbot-a", Joined: true, Leader: "fleetbot-c", Members: []membership.Member{
		{Identity: "fleetbot-a", Address: netip.MustParseAddrPort("127.0.0.1:1")}, {Identity: "fleetbot-b", Address: bAddr}, {Identity: "fleetbot-c", Address: cAddr}}}
	rt := newRouter("Acme/Control", []byte(routeSecret), 0, func() membership.View { return v }, local, slog.New(slog.DiscardHandler))
	control := `{"repository":{"full_name":"acme/control"}}`
	post(t, rt, "push", "push-1", control, routeSecret)
	post(t, rt, "pull_request", "pr-1", control, routeSecret)
	post(t, rt, "installation", "inst-1", `{"action":"created"}`, routeSecret)
	post(t, rt, "status", "flux-1", `{"repository":{"full_name":"acme/cluster-a"}}`, routeSecret)
	rt.flush(context.Background())
	assert.Equal(t, []string{"push-1", "inst-1", "flux-1"}, local.deliveries())
	assert.Equal(t, []string{"push-1", "inst-1", "flux-1"}, bSink.deliveries(), "a rollout's status: every member applies its share")
	assert.Equal(t, []string{"push-1", "pr-1", "inst-1", "flux-1"}, cSink.deliveries(), "the leader checks the pull request")

	v.Leading, v.Leader = true, "fleetbot-a"
	v.Members = v.Members[:1]
	post(t, rt, "check_run", "cr-1", control, routeSecret)
	post(t, rt, "push", "push-2", control, routeSecret)
	rt.flush(context.Background())
	assert.Equal(t, []string{"push-1", "inst-1", "flux-1", "cr-1", "push-2"}, local.deliveries())
	assert.Empty(t, rt.held)
}

// progress records the rollout check runs written.
type progress struct{ shas []string }

func (p *progress) Progress(_ context.Context, sha string, _ checkrun.Result) error {
	p.shas = append(p.shas, sha)
	return nil
}

// TestRolloutCheckFromTheLeaderOnly: every replica applies its share of a rollout, only the
// leader writes the rollout's check run on the control commit; one replica alone writes it.
func TestRolloutCheckFromTheLeaderOnly(t *testing.T) {
	t.Parallel()
	var single *replicaSet
	p := &progress{}
	require.NoError(t, single.rolloutChecks(p).Progress(context.Background(), "one", checkrun.Result{}))
	v := membership.View{Self: "fleetbot-a", Joined: true}
	c := leaderRolloutChecks{RolloutChecks: p, view: func() membership.View { return v }}
	require.NoError(t, c.Progress(context.Background(), "follower", checkrun.Result{}))
	v.Leading = true
	require.NoError(t, c.Progress(context.Background(), "leader", checkrun.Result{}))
	assert.Equal(t, []string{"one", "leader"}, p.shas)
}

// TestRouterBoundsWhatItHolds: deliveries held for an unreachable owner are bounded in number;
// the oldest go first (the new owner's full apply covers their repos).
func TestRouterBoundsWhatItHolds(t *testing.T) {
	t.Parallel()
	v := membership.View{Self: "fleetbot-a", Joined: true, Members: []membership.Member{
		{Identity: "fleetbot-a", Address: netip.MustParseAddrPort("127.0.0.1:1")}, {Identity: "fleetbot-b", Address: unreachable(t)}}}
	rt := newRouter("acme/control", []byte(routeSecret), 0, func() membership.View { return v }, &sink{}, slog.New(slog.DiscardHandler))
	theirs := repoOwnedBy(t, v, "fleetbot-b")
	for i := range maxHeld + 5 {
		rt.hold(held{dest: toOwner, repo: theirs, id: fmt.Sprint(i), body: []byte("{}")})
	}
	require.Len(t, rt.held, maxHeld)
	assert.Equal(t, "5", rt.held[0].id, "the oldest were dropped")
}
