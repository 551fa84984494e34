package reconcile

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Shard is one replica's share of the target repos when several fleetbot
// services reconcile one fleet: replica Index of Count owns the repos that
// jump consistent hashing of the repo name assigns to it. Every replica
// renders the whole control repo (so duplicate repos and removals are
// judged fleet-wide) and plans and writes only its own repos. Growing
// Count from n to n+1 moves only about 1/(n+1) of the repos, all to the new
// replica. The zero Shard owns every repo.
//
// A live Shard (Live set, Index and Count zero) is the share of the replicas
// coordinated on Kubernetes Leases (internal/membership): who owns a repo
// changes as replicas come and go, and a run takes one Partition when it
// starts (Fixed) and keeps it to the end.
type Shard struct {
	// Index is this replica's number, 0 <= Index < Count (a StatefulSet
	// ordinal).
	Index int
	// Count is the number of replicas; 0 or 1 means no sharding.
	Count int
	// Live, when set, returns this replica's share as of now.
	Live func() Partition
}

// Partition is one replica's share of the target repos at one instant.
type Partition interface {
	// Owns reports whether this replica owns repo (case does not matter).
	Owns(repo string) bool
	// Key names the partition: it changes whenever the owner of some repo may have (a
	// baseline recorded under another key is not used).
	Key() string
}

// Fixed is s with its live share taken now and kept: a run's view of who owns what does not
// change under it. A static Shard is returned as it is.
func (s Shard) Fixed() Shard {
	if s.Live == nil {
		return s
	}
	p := s.Live()
	return Shard{Live: func() Partition { return p }}
}

// Sharded reports whether s may leave out some repos (a static shard of more than one replica,
// or a live one).
func (s Shard) Sharded() bool { return s.Count > 1 || s.Live != nil }

// Key names the share for the incremental baselines: "INDEX/COUNT", or the live partition's key.
func (s Shard) Key() string {
	if s.Live != nil {
		return s.Live().Key()
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// ParseShard reads "INDEX/COUNT" (e.g. "2/5"); "" is the zero Shard.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	var sh Shard
	if _, err := fmt.Sscanf(s, "%d/%d", &sh.Index, &sh.Count); err != nil || fmt.Sprintf("%d/%d", sh.Index, sh.Count) != s {
		return Shard{}, fmt.Errorf("shard %q: want INDEX/COUNT, e.g. 0/3", s)
	}
	return sh, sh.Validate()
}

// Validate reports an Index outside [0, Count), or a live Shard with an Index or a Count.
func (s Shard) Validate() error {
	if s.Live != nil && (s.Index != 0 || s.Count != 0) {
		return fmt.Errorf("shard %d/%d and a live partition: a replica's share is static (--shard) or from Leases, not both", s.Index, s.Count)
	}
	if s.Count < 0 || (s.Count > 0 && (s.Index < 0 || s.Index >= s.Count)) || (s.Count == 0 && s.Index != 0) {
		return fmt.Errorf("shard %d/%d: want 0 <= index < count", s.Index, s.Count)
	}
	return nil
}

// Owns reports whether repo (a name without the owner; case does not
// matter, as on GitHub) belongs to this shard.
func (s Shard) Owns(repo string) bool {
	if s.Live != nil {
		return s.Live().Owns(repo)
	}
	if s.Count <= 1 {
		return true
	}
	return ShardOf(repo, s.Count) == s.Index
}

// ShardOf returns the replica (0..count-1) that owns repo: Lamping and
// Veach's jump consistent hash of the FNV-1a hash of the lower-case name.
func ShardOf(repo string, count int) int {
	if count <= 1 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(repo)))
	key := h.Sum64()
	var b, j int64 = -1, 0
	for j < int64(count) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}
