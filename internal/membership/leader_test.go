package membership

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitView waits for a view that satisfies ok among the changes a replica reports.
func waitView(t *testing.T, changes <-chan View, what string, ok func(View) bool) View {
	t.Helper()
	// The bound only ends a test that would otherwise hang; the events decide.
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		select {
		case v := <-changes:
			if ok(v) {
				return v
			}
		case <-deadline.C:
			t.Fatalf("no view where %s", what)
		}
	}
}

// TestOneLeaderAndHandoverOnShutdown: of two replicas running, one leads (client-go's leader
// election on the leader Lease), the other knows it; when the leader shuts down it releases
// both its Leases and the other takes the lead and the whole partition, without waiting for a
// Lease to expire.
func TestOneLeaderAndHandoverOnShutdown(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC))
	run := func(id string, n byte) (*Membership, <-chan View, context.CancelFunc, <-chan struct{}) {
		changes := make(chan View, 64)
		m, err := New(Config{Client: client, Namespace: ns, Identity: id,
			Address: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, n}), 8080), Clock: clk,
			// The election keeps client-go's wall clock: a short retry lets the handover come
			// soon after the release; the test waits on the views, not on the time.
			LeaseDuration: time.Second, RenewPeriod: 20 * time.Millisecond,
			OnChange: func(_, after View) { changes <- after }})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		return m, changes, cancel, done
	}
	a, ca, stopA, doneA := run("fleetbot-a", 1)
	waitView(t, ca, "a leads", func(v View) bool { return v.Leading && v.Leader == "fleetbot-a" && v.Joined })

	b, cb, stopB, doneB := run("fleetbot-b", 2)
	defer func() { stopB(); <-doneB }()
	waitView(t, cb, "b knows a leads", func(v View) bool { return v.Leader == "fleetbot-a" && !v.Leading && v.Joined })
	require.NoError(t, a.Step(context.Background()))
	require.NoError(t, b.Step(context.Background()))
	require.Len(t, b.View().Members, 2)

	stopA()
	<-doneA
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), "fleetbot-member-fleetbot-a", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, l.Spec.HolderIdentity, "a released its Lease")
	v := waitView(t, cb, "b leads", func(v View) bool { return v.Leading && v.Leader == "fleetbot-b" })
	_ = v
	require.NoError(t, b.Step(context.Background()))
	require.Equal(t, []string{"fleetbot-b"}, ids(b.View()))
	require.True(t, b.View().Owns("cluster-0001"))
	require.Error(t, a.Ready())
}
