package membership

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// releaseTimeout bounds how long a shutting-down replica spends releasing its Lease.
const releaseTimeout = 2 * time.Second

// Run keeps this replica's Lease renewed and its view current every RenewPeriod, and stands
// for leader on the leader Lease (client-go's leader election), until ctx is done; then it
// releases both Leases so the others take over at once. Failures are logged and retried at
// the next step: the view already says what they mean (not joined, fewer members).
func (m *Membership) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.lead(ctx)
	}()
	t := m.cfg.Clock.NewTicker(m.cfg.RenewPeriod)
	defer t.Stop()
	for {
		if err := m.Step(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("replica membership: heartbeat failed; retrying", "err", err, "in", m.cfg.RenewPeriod)
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			if err := m.leave(rctx); err != nil {
				m.log.Warn("replica membership: could not release the Lease; the others wait for it to expire", "err", err)
			}
			<-done
			return
		case <-t.C():
		}
	}
}

// lead stands for leader until ctx is done, again after each lost lead. The leader Lease has
// the members' duration, renewed within two thirds of it, tried every RenewPeriod; it is
// released on shutdown (ReleaseOnCancel).
func (m *Membership) lead(ctx context.Context) {
	// client-go's election logs through the context's logger: this replica's, not klog's
	// global one (text on stderr beside serve's JSON lines).
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(m.log.With("component", "leader-election").Handler()))
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(m.electionConfig())
		if err != nil {
			m.log.Error("replica membership: cannot stand for leader", "err", err)
			return
		}
		le.Run(ctx)
	}
}

// electionConfig is the leader election on LeaderLease.
func (m *Membership) electionConfig() leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metaOf(m.cfg.Namespace, LeaderLease),
			Client:     m.cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: m.cfg.Identity},
		},
		LeaseDuration:   m.cfg.LeaseDuration,
		RenewDeadline:   m.cfg.LeaseDuration * 2 / 3,
		RetryPeriod:     m.cfg.RenewPeriod,
		ReleaseOnCancel: true,
		Name:            LeaderLease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { m.setLeader(m.cfg.Identity, true) },
			OnStoppedLeading: func() { m.setLeading(false) },
			OnNewLeader:      func(id string) { m.setLeader(id, id == m.cfg.Identity) },
		},
	}
}

func (m *Membership) setLeader(id string, leading bool) {
	m.mu.Lock()
	m.leader = id
	m.leading = m.leading || leading
	m.mu.Unlock()
	m.refresh()
}

func (m *Membership) setLeading(leading bool) {
	m.mu.Lock()
	m.leading = leading
	m.mu.Unlock()
	m.refresh()
}
