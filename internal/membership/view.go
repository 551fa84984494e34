package membership

import (
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
)

// Member is one live replica: its identity (the pod name, the holder of its Lease) and the
// address its peers forward deliveries to (the pod's IP and serve's port).
type Member struct {
	Identity string
	Address  netip.AddrPort
}

// View is one replica's picture of the membership at one instant: who is live, who leads, and
// so who owns which target repo. A View is immutable: a run takes one and keeps it, so the
// repos it plans do not change under it.
type View struct {
	// Self is this replica's identity.
	Self string
	// Joined is true while this replica's own Lease is renewed within its duration: a replica
	// that cannot renew owns nothing (its share is being taken over) and is not ready.
	Joined bool
	// Members are the live replicas (this one included once joined), sorted by identity.
	Members []Member
	// Leader is the identity of the leader as last observed on the leader Lease ("" while
	// none is known); it may be a replica that just died, until another takes the Lease over.
	Leader string
	// Leading is true while this replica holds the leader Lease.
	Leading bool
}

// Owner returns the member that owns repo (a name without its owner; case does not matter, as
// on GitHub): the member of highest rendezvous weight (Thaler and Ravishankar's
// highest-random-weight hashing), so a member joining takes about 1/n of the repos, each from
// whichever member had it, and a member leaving hands only its own repos to the others. ok is
// false when there is no live member.
func (v View) Owner(repo string) (m Member, ok bool) {
	var best uint64
	for _, c := range v.Members {
		w := weight(c.Identity, repo)
		if !ok || w > best || (w == best && c.Identity < m.Identity) {
			m, best, ok = c, w, true
		}
	}
	return m, ok
}

// Owns reports whether this replica owns repo now: it has joined and is repo's Owner.
func (v View) Owns(repo string) bool {
	if !v.Joined {
		return false
	}
	m, ok := v.Owner(repo)
	return ok && m.Identity == v.Self
}

// Key names the partition: two views with the same Key give every repo the same owner. It
// salts the incremental baselines, so a membership change makes the next push a full run.
func (v View) Key() string {
	ids := memberIDs(v)
	joined := "joined"
	if !v.Joined {
		joined = "not-joined"
	}
	return "members:" + v.Self + ":" + joined + ":" + strings.Join(ids, ",")
}

// Member returns the live member with identity id.
func (v View) Member(id string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id string) int { return strings.Compare(m.Identity, id) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}

// LeaderMember returns the leader when it is a live member (its address is then known).
func (v View) LeaderMember() (Member, bool) {
	if v.Leader == "" {
		return Member{}, false
	}
	return v.Member(v.Leader)
}

// weight is repo's rendezvous weight on member: FNV-1a of the lower-case repo name and the
// member's identity, through SplitMix64's finalizer so that near-identical identities (pod
// names differ in a suffix) still spread evenly.
func weight(member, repo string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(repo)))
	h.Write([]byte{0})
	h.Write([]byte(member))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
