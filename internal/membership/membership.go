// Package membership coordinates several fleetbot serve replicas on Kubernetes Leases
// (coordination.k8s.io/v1): one Lease per replica, renewed as a heartbeat, says who is live
// (and where its peers reach it), and client-go's leader election on one more Lease picks the
// leader that runs the single jobs. The live members partition the target repos by rendezvous
// hashing (View.Owner). Nothing here talks to GitHub; serve decides what each replica runs.
package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

const (
	// DefaultLeaseDuration is how long a replica's Lease (and the leader's) holds without a
	// renewal: a replica killed without a word has its share, or the lead, taken over after
	// at most this plus one RenewPeriod.
	DefaultLeaseDuration = 10 * time.Second
	// MaxLeaseDuration bounds LeaseDuration: a dead replica's share must be taken within 15 s.
	MaxLeaseDuration = 15 * time.Second
	// DefaultRenewPeriod is how often a replica renews its Lease and reads the others'.
	DefaultRenewPeriod = 2 * time.Second

	// LeaderLease is the name of the leader's Lease.
	LeaderLease = "fleetbot-leader"
	// MemberLeasePrefix starts the name of every replica's Lease ("fleetbot-member-<pod>").
	MemberLeasePrefix = "fleetbot-member-"
	// RoleLabel marks the replicas' Leases (value "member"): the one label a replica lists.
	RoleLabel = "fleetbot.io/lease"
	// AddressAnnotation on a replica's Lease is the IP:port its peers forward deliveries to.
	AddressAnnotation = "fleetbot.io/address"
)

// Config configures a Membership.
type Config struct {
	// Client reaches the API server (in a pod: rest.InClusterConfig; tests: the fake clientset).
	Client kubernetes.Interface
	// Namespace holds the Leases (the pod's own: RBAC grants Leases there only).
	Namespace string
	// Identity is this replica's name, unique among the live ones: the pod name.
	Identity string
	// Address is the IP:port peers forward deliveries to (the pod IP and serve's port).
	Address netip.AddrPort
	// PodUID, when set, makes the Pod the owner of the replica's Lease, so Kubernetes deletes
	// the Lease with the Pod and the Leases of replaced pods do not pile up.
	PodUID string
	// LeaseDuration (default DefaultLeaseDuration, at most MaxLeaseDuration) and RenewPeriod
	// (default DefaultRenewPeriod, less than a third of LeaseDuration).
	LeaseDuration time.Duration
	RenewPeriod   time.Duration
	// Clock drives the heartbeat and judges the others' Leases (nil: the wall clock; tests
	// step a fake one). client-go's leader election keeps its own wall clock.
	Clock clock.WithTicker
	// Logger may be nil.
	Logger *slog.Logger
	// OnChange, when set, is called with the view before and after every change of the
	// members, of this replica's joined state or of the leader, one change at a time (from
	// Step or the leader election; it must not call Step).
	OnChange func(before, after View)
}

// Membership is this replica's membership: Run keeps its Lease renewed and its View current.
type Membership struct {
	cfg Config
	log *slog.Logger

	// step serialises Step (Run's loop and a test's calls); notify serialises refresh, so
	// OnChange sees the changes one at a time and in order.
	step   sync.Mutex
	notify sync.Mutex

	mu sync.Mutex
	// seen is, per other member's Lease, what was last read and when (by this replica's clock):
	// a Lease is live while it changed within its duration, whatever the clocks of the others
	// say (client-go's leader election judges the leader Lease the same way).
	seen map[string]observed
	// renewed is when this replica's own Lease was last written.
	renewed time.Time
	leader  string
	leading bool
	view    View
}

// observed is another replica's Lease as last read.
type observed struct {
	member   Member
	renew    string // the record's renewTime and holder, as read: a change is a heartbeat
	at       time.Time
	duration time.Duration
}

// New checks cfg and returns a Membership that has not joined yet.
func New(cfg Config) (*Membership, error) {
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewPeriod == 0 {
		cfg.RenewPeriod = DefaultRenewPeriod
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Membership{cfg: cfg, log: log, seen: map[string]observed{}}
	m.view = View{Self: cfg.Identity}
	return m, nil
}

func (cfg Config) validate() error {
	switch {
	case cfg.Client == nil:
		return errors.New("membership: no Kubernetes client")
	case cfg.Namespace == "":
		return errors.New("membership: no namespace: the Leases live in the pod's namespace (set POD_NAMESPACE from the downward API)")
	case cfg.Identity == "":
		return errors.New("membership: no identity: set POD_NAME from the downward API (metadata.name)")
	case !cfg.Address.IsValid() || cfg.Address.Port() == 0:
		return fmt.Errorf("membership: address %q: want the pod's IP and serve's port, e.g. 10.0.0.7:8080 (set POD_IP from the downward API, status.podIP)", cfg.Address)
	case cfg.LeaseDuration < 0 || cfg.LeaseDuration > MaxLeaseDuration:
		return fmt.Errorf("membership: lease duration %s: want at most %s (a dead replica's share must be taken within 15 s)", cfg.LeaseDuration, MaxLeaseDuration)
	case cfg.RenewPeriod <= 0 || 3*cfg.RenewPeriod > cfg.LeaseDuration:
		return fmt.Errorf("membership: renew period %s: want more than 0 and at most a third of the lease duration %s, so a renewal can fail twice without losing the Lease", cfg.RenewPeriod, cfg.LeaseDuration)
	}
	if errs := validation.IsDNS1123Subdomain(MemberLeasePrefix + cfg.Identity); len(errs) > 0 {
		return fmt.Errorf("membership: identity %q does not make a valid Lease name %q: %s", cfg.Identity, MemberLeasePrefix+cfg.Identity, errs[0])
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return fmt.Errorf("membership: namespace %q: %s", cfg.Namespace, errs[0])
	}
	return nil
}

// View returns the current view.
func (m *Membership) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view
}

// Ready is nil once this replica has joined (its Lease is written and renewed in time), and
// says why not otherwise: serve's /readyz reports it.
func (m *Membership) Ready() error {
	if m.View().Joined {
		return nil
	}
	return fmt.Errorf("not a member yet: Lease %s/%s%s not renewed within %s", m.cfg.Namespace, MemberLeasePrefix, m.cfg.Identity, m.cfg.LeaseDuration)
}

// Step is one heartbeat: it renews this replica's Lease, reads the other replicas' and
// recomputes the view. It returns what failed (the view is recomputed anyway: a replica that
// cannot renew leaves the membership once its Lease would have expired).
func (m *Membership) Step(ctx context.Context) error {
	m.step.Lock()
	defer m.step.Unlock()
	errRenew := m.renew(ctx)
	errList := m.observe(ctx)
	m.refresh()
	return errors.Join(errRenew, errList)
}

// leaseName is the name of this replica's Lease.
func (m *Membership) leaseName() string { return MemberLeasePrefix + m.cfg.Identity }

// renew writes this replica's Lease (creating it the first time) with the clock's now.
func (m *Membership) renew(ctx context.Context) error {
	c := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace)
	now := m.cfg.Clock.Now()
	lease, err := c.Get(ctx, m.leaseName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, m.lease(nil, now), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Lease %s/%s: %w", m.cfg.Namespace, m.leaseName(), err)
		}
	case err != nil:
		return fmt.Errorf("reading Lease %s/%s: %w", m.cfg.Namespace, m.leaseName(), err)
	default:
		// Update carries the resourceVersion read: a write racing ours fails (compare-and-swap).
		if _, err = c.Update(ctx, m.lease(lease, now), metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("renewing Lease %s/%s: %w", m.cfg.Namespace, m.leaseName(), err)
		}
	}
	m.mu.Lock()
	m.renewed = now
	m.mu.Unlock()
	return nil
}

// lease is this replica's Lease renewed at now, over the one read (nil: a new one).
func (m *Membership) lease(old *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if old != nil {
		l = old.DeepCopy()
	}
	l.Name, l.Namespace = m.leaseName(), m.cfg.Namespace
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[RoleLabel] = "member"
	l.Labels["app.kubernetes.io/name"] = "fleetbot"
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AddressAnnotation] = m.cfg.Address.String()
	if m.cfg.PodUID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: m.cfg.Identity, UID: types.UID(m.cfg.PodUID)}}
	}
	id, secs, t := m.cfg.Identity, int32(m.cfg.LeaseDuration/time.Second), metav1.NewMicroTime(now)
	if secs < 1 {
		secs = 1
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != id {
		l.Spec.AcquireTime = &t
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &t
	return l
}

// observe reads the replicas' Leases and records which changed since the last read.
func (m *Membership) observe(ctx context.Context) error {
	list, err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: RoleLabel + "=member"})
	if err != nil {
		return fmt.Errorf("listing the replicas' Leases in namespace %s (label %s=member): %w", m.cfg.Namespace, RoleLabel, err)
	}
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	present := map[string]bool{}
	for i := range list.Items {
		l := &list.Items[i]
		if l.Name == m.leaseName() {
			continue
		}
		mem, d, err := memberOf(l)
		if err != nil {
			m.log.Warn("ignoring a replica's Lease", "lease", m.cfg.Namespace+"/"+l.Name, "err", err)
			continue
		}
		present[l.Name] = true
		renew := mem.Identity + "@" + l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
		if o, ok := m.seen[l.Name]; ok && o.renew == renew {
			continue
		}
		m.seen[l.Name] = observed{member: mem, renew: renew, at: now, duration: d}
	}
	for name := range m.seen {
		if !present[name] {
			delete(m.seen, name) // deleted, released or unreadable: not a member
		}
	}
	return nil
}

// memberOf reads a replica's Lease: its holder, its address and its duration. A released Lease
// (no holder) or one whose address is not an IP:port is not a member.
func memberOf(l *coordinationv1.Lease) (Member, time.Duration, error) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return Member{}, 0, errors.New("released (no holder)")
	}
	if l.Spec.RenewTime == nil {
		return Member{}, 0, errors.New("never renewed (no spec.renewTime)")
	}
	id := *l.Spec.HolderIdentity
	if l.Name != MemberLeasePrefix+id {
		return Member{}, 0, fmt.Errorf("holder %q does not match the Lease's name (want %s%s)", id, MemberLeasePrefix, id)
	}
	addr, err := netip.ParseAddrPort(l.Annotations[AddressAnnotation])
	if err != nil || addr.Port() == 0 {
		return Member{}, 0, fmt.Errorf("annotation %s %q: want IP:port", AddressAnnotation, l.Annotations[AddressAnnotation])
	}
	d := MaxLeaseDuration
	if s := l.Spec.LeaseDurationSeconds; s != nil && *s > 0 && time.Duration(*s)*time.Second < d {
		d = time.Duration(*s) * time.Second
	}
	return Member{Identity: id, Address: addr}, d, nil
}

// refresh recomputes the view from what was observed and calls OnChange when it changed.
func (m *Membership) refresh() {
	m.notify.Lock()
	defer m.notify.Unlock()
	m.mu.Lock()
	now := m.cfg.Clock.Now()
	v := View{Self: m.cfg.Identity, Leader: m.leader, Leading: m.leading}
	v.Joined = !m.renewed.IsZero() && now.Sub(m.renewed) < m.cfg.LeaseDuration
	if v.Joined {
		v.Members = append(v.Members, Member{Identity: m.cfg.Identity, Address: m.cfg.Address})
	}
	for _, o := range m.seen {
		if now.Sub(o.at) < o.duration && o.member.Identity != m.cfg.Identity {
			v.Members = append(v.Members, o.member)
		}
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.Identity, b.Identity) })
	before := m.view
	m.view = v
	m.mu.Unlock()
	if before.Key() != v.Key() || before.Leader != v.Leader || before.Leading != v.Leading {
		if m.cfg.OnChange != nil {
			m.cfg.OnChange(before, v)
		}
		m.log.Info("replica membership changed", "members", len(v.Members), "ids", strings.Join(memberIDs(v), ","), "joined", v.Joined, "leader", v.Leader, "leading", v.Leading)
	}
}

// leave releases this replica's Lease (no holder), so its peers take its share at their next
// step instead of after the Lease's duration. It is what a clean shutdown does.
func (m *Membership) leave(ctx context.Context) error {
	m.step.Lock()
	defer m.step.Unlock()
	c := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace)
	l, err := c.Get(ctx, m.leaseName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("releasing Lease %s/%s: %w", m.cfg.Namespace, m.leaseName(), err)
	}
	l.Spec.HolderIdentity = nil
	if _, err := c.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("releasing Lease %s/%s: %w", m.cfg.Namespace, m.leaseName(), err)
	}
	m.mu.Lock()
	m.renewed = time.Time{}
	m.mu.Unlock()
	m.refresh()
	return nil
}

func metaOf(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func memberIDs(v View) []string {
	ids := make([]string, len(v.Members))
	for i, m := range v.Members {
		ids[i] = m.Identity
	}
	return ids
}
