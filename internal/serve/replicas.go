package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/membership"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// Replicas configures serve as one of several replicas coordinated on Kubernetes Leases
// (docs/scale-out.md). nil: one replica, no Kubernetes access.
type Replicas struct {
	// Namespace holds the Leases (the pod's own).
	Namespace string
	// Identity is the pod name; IP the pod's IP: peers forward deliveries to IP and the port
	// serve listens on.
	Identity string
	IP       netip.Addr
	// PodUID, when set, makes the Pod the owner of the replica's Lease.
	PodUID string
	// Kubeconfig names a kubeconfig file ("": the pod's service account).
	Kubeconfig string
	// Client, when set, is used instead of one built from Kubeconfig (tests: the fake clientset).
	Client kubernetes.Interface
	// LeaseDuration and RenewPeriod: zero values take membership's defaults (10 s, 2 s).
	LeaseDuration, RenewPeriod time.Duration
	// Clock drives the heartbeat (nil: the wall clock).
	Clock clock.WithTicker
}

// forwardRetry is how often a replica retries the deliveries it holds for unreachable peers.
const forwardRetry = time.Second

// replicaSet is serve's side of the membership: the Membership, the router in front of the
// dispatcher, and what a membership change does.
type replicaSet struct {
	members *membership.Membership
	router  *router
	// changed receives the views after each change of the members (buffered; newest wins).
	changed chan membership.View
	// ready reports the joined state to /readyz (set before Run).
	ready func(error)
}

// newReplicaSet builds the membership of cfg.Replicas over the routes of srv (the dispatcher
// it forwards to) and gives the installation's content budget its share.
func newReplicaSet(cfg *Config, srv *ingress.Server) (*replicaSet, error) {
	r := cfg.Replicas
	switch {
	case cfg.App.Shard.Count > 1:
		return nil, errors.New("--shard and --replicas-from-leases: a replica's share is static or from Leases, not both")
	case cfg.JobProcess:
		return nil, errors.New("--job-process and --replicas-from-leases: not supported together yet; run the replicas without --job-process")
	}
	port, err := listenPort(cfg.Listener)
	if err != nil {
		return nil, err
	}
	client := r.Client
	if client == nil {
		if client, err = membership.NewClient(r.Kubeconfig); err != nil {
			return nil, err
		}
	}
	rs := &replicaSet{changed: make(chan membership.View, 1)}
	rs.members, err = membership.New(membership.Config{Client: client, Namespace: r.Namespace, Identity: r.Identity,
		Address: netip.AddrPortFrom(r.IP, port), PodUID: r.PodUID, LeaseDuration: r.LeaseDuration, RenewPeriod: r.RenewPeriod,
		Clock: r.Clock, Logger: cfg.Logger, OnChange: rs.onChange})
	if err != nil {
		return nil, fmt.Errorf("--replicas-from-leases %s: %w", r.Namespace, err)
	}
	cfg.App.Shard = app.Shard{Live: func() app.Partition { return rs.members.View() }}
	cfg.App.GitHub.Budget.Share = func() int { return len(rs.members.View().Members) }
	rs.router = newRouter(cfg.Control, cfg.Secret, cfg.MaxBody, rs.members.View, srv.Handler(), cfg.Logger)
	return rs, nil
}

// listenPort is the port serve listens on (peers forward to it).
func listenPort(ln net.Listener) (uint16, error) {
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("--replicas-from-leases: the listener's address %s: %w", ln.Addr(), err)
	}
	return ap.Port(), nil
}

// onChange passes a change of the members on (the newest view wins) and lets held deliveries go.
func (rs *replicaSet) onChange(before, after membership.View) {
	if rs.ready != nil {
		rs.ready(rs.members.Ready())
	}
	if before.Key() != after.Key() {
		select {
		case <-rs.changed:
		default:
		}
		rs.changed <- after
	}
	if rs.router != nil {
		rs.router.wake()
	}
}

// run keeps the membership and the forwarding going under wg until ctx is done; every change of the members queues a full apply of
// this replica's share, so the repos it gained are reconciled by it now.
func (rs *replicaSet) run(ctx context.Context, wg *sync.WaitGroup, resync func(reason string)) {
	wg.Add(3)
	go func() { defer wg.Done(); rs.members.Run(ctx) }()
	go func() { defer wg.Done(); rs.router.Run(ctx, forwardRetry) }()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case v := <-rs.changed:
				if v.Joined {
					resync(fmt.Sprintf("membership: %d replicas", len(v.Members)))
				}
			}
		}
	}()
}

// leaderRolloutChecks writes the rollout's check run on the control commit from the leader only:
// every replica applies its share and sees the rollout's progress, one of them reports it.
type leaderRolloutChecks struct {
	webhook.RolloutChecks
	view func() membership.View
}

// Progress implements webhook.RolloutChecks.
func (c leaderRolloutChecks) Progress(ctx context.Context, sha string, r checkrun.Result) error {
	if !c.view().Leading {
		return nil
	}
	return c.RolloutChecks.Progress(ctx, sha, r)
}

// rolloutChecks is checks, written by the leader only when serve runs as replicas.
func (rs *replicaSet) rolloutChecks(checks webhook.RolloutChecks) webhook.RolloutChecks {
	if rs == nil {
		return checks
	}
	return leaderRolloutChecks{RolloutChecks: checks, view: rs.members.View}
}
