package membership

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

const ns = "fleetbot"

// replica is one member on the shared fake API server, with the views its OnChange saw.
type replica struct {
	*Membership
	changes []View
}

func newReplica(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock, id string, n int) *replica {
	t.Helper()
	r := &replica{}
	m, err := New(Config{Client: client, Namespace: ns, Identity: id, PodUID: "uid-" + id,
		Address: netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:8080", n)), Clock: clk,
		OnChange: func(_, after View) { r.changes = append(r.changes, after) }})
	require.NoError(t, err)
	r.Membership = m
	return r
}

// stepAll steps every replica once, in order.
func stepAll(t *testing.T, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		require.NoError(t, r.Step(context.Background()))
	}
}

func ids(v View) []string {
	var out []string
	for _, m := range v.Members {
		out = append(out, m.Identity)
	}
	return out
}

func repos(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cluster-%04d", i)
	}
	return out
}

// TestJoinWritesTheReplicasLease: a replica's first step writes its Lease (holder, duration,
// renew time by the injected clock, the address its peers forward to, the Pod as owner) and,
// alone, it owns every repo and is ready.
func TestJoinWritesTheReplicasLease(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	a := newReplica(t, client, clk, "fleetbot-a", 1)
	require.Error(t, a.Ready(), "not ready before joining")
	assert.False(t, a.View().Owns("cluster-0001"), "a replica that has not joined owns nothing")

	stepAll(t, a)
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), "fleetbot-member-fleetbot-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "fleetbot-a", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(10), *l.Spec.LeaseDurationSeconds)
	assert.True(t, l.Spec.RenewTime.Time.Equal(clk.Now()))
	assert.Equal(t, "10.0.0.1:8080", l.Annotations[AddressAnnotation])
	assert.Equal(t, "member", l.Labels[RoleLabel])
	require.Len(t, l.OwnerReferences, 1)
	assert.Equal(t, "Pod", l.OwnerReferences[0].Kind)
	assert.Equal(t, "fleetbot-a", l.OwnerReferences[0].Name)

	require.NoError(t, a.Ready())
	v := a.View()
	assert.Equal(t, []string{"fleetbot-a"}, ids(v))
	for _, r := range repos(50) {
		assert.True(t, v.Owns(r), r)
	}
	require.Len(t, a.changes, 1, "joining is one change")

	clk.Step(DefaultRenewPeriod)
	stepAll(t, a)
	l, err = client.CoordinationV1().Leases(ns).Get(context.Background(), "fleetbot-member-fleetbot-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, l.Spec.RenewTime.Time.Equal(clk.Now()), "renewed at the clock's time")
	assert.Len(t, a.changes, 1, "a renewal changes nothing")
}

// TestReplicasPartitionEveryRepoOnce: three replicas agree on one owner per repo, each owning
// about a third.
func TestReplicasPartitionEveryRepoOnce(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	rs := []*replica{newReplica(t, client, clk, "fleetbot-a", 1), newReplica(t, client, clk, "fleetbot-b", 2), newReplica(t, client, clk, "fleetbot-c", 3)}
	stepAll(t, rs...)
	stepAll(t, rs...)
	owned := map[string]int{}
	for _, repo := range repos(3000) {
		n := 0
		for _, r := range rs {
			v := r.View()
			require.Equal(t, []string{"fleetbot-a", "fleetbot-b", "fleetbot-c"}, ids(v))
			if v.Owns(repo) {
				n++
				owned[r.cfg.Identity]++
			}
		}
		require.Equal(t, 1, n, "%s has exactly one owner", repo)
	}
	for id, n := range owned {
		assert.InDelta(t, 1000, n, 150, "%s owns about a third", id)
	}
	// The owner's address is what its Lease announced.
	m, ok := rs[0].View().Owner("cluster-0007")
	require.True(t, ok)
	other, _ := rs[1].View().Member(m.Identity)
	assert.Equal(t, m, other)
}

// TestJoiningReplicaMovesAboutOneNth: from three replicas to four, only the repos the new one
// takes move (about a quarter), and from four back to three only its repos move.
func TestJoiningReplicaMovesAboutOneNth(t *testing.T) {
	three := View{Self: "x", Joined: true, Members: []Member{{Identity: "fleetbot-a"}, {Identity: "fleetbot-b"}, {Identity: "fleetbot-c"}}}
	four := three
	four.Members = append(append([]Member{}, three.Members...), Member{Identity: "fleetbot-d"})
	moved := 0
	all := repos(4000)
	for _, r := range all {
		before, _ := three.Owner(r)
		after, _ := four.Owner(r)
		if before != after {
			moved++
			assert.Equal(t, "fleetbot-d", after.Identity, "%s moves only to the new replica", r)
		}
	}
	assert.InDelta(t, len(all)/4, moved, float64(len(all))/4*0.15, "about 1/4 of the repos move")
}

// TestDeadReplicasShareIsTakenOver: a replica killed without a word (it stops renewing) keeps
// its repos for its Lease's duration, then the others take them over, each learning it in
// OnChange, within 15 s of its last renewal.
func TestDeadReplicasShareIsTakenOver(t *testing.T) {
	client := fake.NewClientset()
	start := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	a, b, c := newReplica(t, client, clk, "fleetbot-a", 1), newReplica(t, client, clk, "fleetbot-b", 2), newReplica(t, client, clk, "fleetbot-c", 3)
	stepAll(t, a, b, c)
	stepAll(t, a, b, c)
	var cs []string
	for _, r := range repos(300) {
		if c.View().Owns(r) {
			cs = append(cs, r)
		}
	}
	require.NotEmpty(t, cs)
	killed := clk.Now() // c's last renewal
	changesA := len(a.changes)

	var takeover time.Duration
	for takeover == 0 {
		clk.Step(DefaultRenewPeriod)
		stepAll(t, a, b)
		if len(a.View().Members) == 2 {
			takeover = clk.Since(killed)
		}
		require.Less(t, clk.Since(killed), time.Minute, "c never left")
	}
	assert.LessOrEqual(t, takeover, MaxLeaseDuration, "a dead replica's share is taken within 15 s")
	assert.GreaterOrEqual(t, takeover, DefaultLeaseDuration, "not before its Lease expired")
	for _, r := range cs {
		assert.True(t, a.View().Owns(r) != b.View().Owns(r), "%s: exactly one of a and b owns it", r)
	}
	require.Greater(t, len(a.changes), changesA, "a learnt of the change (serve then reconciles what it gained)")
	assert.Equal(t, []string{"fleetbot-a", "fleetbot-b"}, ids(a.changes[len(a.changes)-1]))
}

// TestReleasedReplicaLeavesAtOnce: a replica shutting down releases its Lease; the others take
// its share at their next step, not after the Lease's duration.
func TestReleasedReplicaLeavesAtOnce(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	a, b := newReplica(t, client, clk, "fleetbot-a", 1), newReplica(t, client, clk, "fleetbot-b", 2)
	stepAll(t, a, b, a)
	require.Len(t, a.View().Members, 2)
	require.NoError(t, b.leave(context.Background()))
	assert.False(t, b.View().Joined)
	assert.Error(t, b.Ready())
	stepAll(t, a) // no time passes
	assert.Equal(t, []string{"fleetbot-a"}, ids(a.View()))
}

// TestReplicaThatCannotRenewOwnsNothing: when the API server refuses the renewal, the step says
// which Lease and why, and once the Lease would have expired the replica owns nothing and is
// not ready (the others are taking its share over); a later renewal brings it back.
func TestReplicaThatCannotRenewOwnsNothing(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	a := newReplica(t, client, clk, "fleetbot-a", 1)
	stepAll(t, a)
	refuse := true
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	for range 4 {
		clk.Step(DefaultRenewPeriod)
		err := a.Step(context.Background())
		require.ErrorContains(t, err, "renewing Lease fleetbot/fleetbot-member-fleetbot-a: etcdserver: request timed out")
		assert.True(t, a.View().Joined, "still within the Lease's duration")
	}
	clk.Step(DefaultRenewPeriod)
	require.Error(t, a.Step(context.Background()))
	assert.False(t, a.View().Joined)
	assert.False(t, a.View().Owns("cluster-0001"))
	assert.ErrorContains(t, a.Ready(), "not a member yet")

	refuse = false
	clk.Step(DefaultRenewPeriod)
	require.NoError(t, a.Step(context.Background()))
	assert.True(t, a.View().Owns("cluster-0001"))
}

// TestForeignLeasesAreNotMembers: a Lease of the role whose holder does not match its name, has
// no address, an address that is not IP:port, or was released, is not a member; one claiming
// a duration of a day is judged by at most 15 s.
func TestForeignLeasesAreNotMembers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	now := metav1.NewMicroTime(clk.Now())
	day := int32(86400)
	lease := func(name, holder, addr string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{RoleLabel: "member"}, Annotations: map[string]string{AddressAnnotation: addr}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &now, LeaseDurationSeconds: &day}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		return l
	}
	client := fake.NewClientset(
		lease("fleetbot-member-x", "y", "10.0.0.9:8080"),
		lease("fleetbot-member-noaddr", "noaddr", ""),
		lease("fleetbot-member-host", "host", "evil.example.com:80"),
		lease("fleetbot-member-gone", "", "10.0.0.8:8080"),
		lease("fleetbot-member-long", "long", "10.0.0.7:8080"),
	)
	a := newReplica(t, client, clk, "fleetbot-a", 1)
	stepAll(t, a)
	assert.Equal(t, []string{"fleetbot-a", "long"}, ids(a.View()))
	clk.Step(MaxLeaseDuration)
	stepAll(t, a)
	assert.Equal(t, []string{"fleetbot-a"}, ids(a.View()), "a claimed duration of a day counts as 15 s")
}

// TestConfigErrors: every bad setting is refused with what to set.
func TestConfigErrors(t *testing.T) {
	client := fake.NewClientset()
	good := Config{Client: client, Namespace: ns, Identity: "fleetbot-a", Address: netip.MustParseAddrPort("10.0.0.1:8080")}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Client = nil }, "no Kubernetes client"},
		{func(c *Config) { c.Namespace = "" }, "POD_NAMESPACE"},
		{func(c *Config) { c.Namespace = "Not_A_Namespace" }, `namespace "Not_A_Namespace"`},
		{func(c *Config) { c.Identity = "" }, "POD_NAME"},
		{func(c *Config) { c.Identity = "Fleetbot_A" }, `identity "Fleetbot_A" does not make a valid Lease name`},
		{func(c *Config) { c.Address = netip.AddrPort{} }, "POD_IP"},
		{func(c *Config) { c.LeaseDuration = 20 * time.Second }, "lease duration 20s: want at most 15s"},
		{func(c *Config) { c.RenewPeriod = 5 * time.Second }, "renew period 5s"},
	} {
		cfg := good
		tc.edit(&cfg)
		_, err := New(cfg)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := New(good)
	assert.NoError(t, err)
}

// TestNewClientSaysWhatIsMissing: outside a pod and without a kubeconfig, the error says what
// replicas on Leases need.
func TestNewClientSaysWhatIsMissing(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := NewClient("")
	assert.ErrorContains(t, err, "not in a pod with a service account token")
	_, err = NewClient(t.TempDir() + "/missing")
	assert.ErrorContains(t, err, "kubeconfig")
}
