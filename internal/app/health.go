package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// Health events over generic-hmac (spec.rollout.health.provider: generic-hmac), for serve's
// /health endpoint: what a cluster's notification-controller posts, verified by the rollout
// slice (rollout.ParseHealthEvent).
type (
	// HealthEvent is one verified event.
	HealthEvent = rollout.HealthEvent
	// HealthEndpoint is where an event was posted: a cluster, and a workspace namespace or
	// "" for flux-system.
	HealthEndpoint = rollout.HealthEndpoint
	// CommitStatus is a commit status (GitHub's), as serve records a health verdict.
	CommitStatus = pr.CommitStatus
)

// Health event limits and errors.
const (
	// MaxHealthEventBytes bounds an event's body.
	MaxHealthEventBytes = rollout.MaxHealthEventBytes
	// HealthSignatureHeader carries an event's signature.
	HealthSignatureHeader = rollout.HealthSignatureHeader
	// MaxHealthKeyFileBytes bounds one cluster's key file: a few keys, one a line.
	MaxHealthKeyFileBytes = 4096
)

var (
	// ErrHealthSignature and ErrHealthEvent: the request is not what a cluster's
	// notification-controller sends (rollout.ErrHealthSignature, rollout.ErrHealthEvent).
	ErrHealthSignature = rollout.ErrHealthSignature
	ErrHealthEvent     = rollout.ErrHealthEvent
	// ErrHealthUnknown: the endpoint names no cluster with a key, or a namespace that is not
	// the cluster's workspace's.
	ErrHealthUnknown = errors.New("unknown health endpoint")
)

// ParseHealthEvent verifies and reads one POST of a generic-hmac Provider (rollout.ParseHealthEvent).
func ParseHealthEvent(body []byte, signature string, keys [][]byte, at HealthEndpoint) (HealthEvent, error) {
	return rollout.ParseHealthEvent(body, signature, keys, at)
}

// HealthKeys reads the keys of an endpoint from dir, a directory holding one file per cluster
// named after it (a Kubernetes Secret mounted as a volume: one key per cluster), each with one
// key a line: the current one and, while it is rotated, the previous one. A workspace
// namespace's keys are derived from the cluster's (rollout.NamespaceKey). The file is read on
// every request, so a rotated Secret applies without a restart. A cluster name that is not a
// DNS label, or a cluster without a file, is ErrHealthUnknown.
func HealthKeys(dir string, at HealthEndpoint) ([][]byte, error) {
	if len(validation.IsDNS1123Label(at.Cluster)) > 0 || (at.Namespace != "" && len(validation.IsDNS1123Label(at.Namespace)) > 0) {
		return nil, fmt.Errorf("%w: the path names no cluster and namespace (DNS labels)", ErrHealthUnknown)
	}
	f, err := os.Open(filepath.Join(dir, at.Cluster))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: no key for cluster %s in %s", ErrHealthUnknown, at.Cluster, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the health key of cluster %s: %w", at.Cluster, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxHealthKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the health key of cluster %s: %w", at.Cluster, err)
	}
	if len(data) > MaxHealthKeyFileBytes {
		return nil, fmt.Errorf("health key file of cluster %s: more than %d bytes: hold a key a line, at most a few", at.Cluster, MaxHealthKeyFileBytes)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k := bytes.TrimSpace(sc.Bytes())
		if len(k) == 0 {
			continue
		}
		if at.Namespace != "" {
			k = rollout.NamespaceKey(k, at.Namespace)
		}
		keys = append(keys, bytes.Clone(k))
	}
	return keys, nil
}

// HealthRecord is the commit status serve records for one verified event.
type HealthRecord struct {
	// Owner and Repo are the cluster repo (flux-system) or the cluster's workspace repo (its
	// namespace).
	Owner, Repo string
	// Commit is the git commit the event names; Status the verdict.
	Commit string
	Status CommitStatus
}

// HealthRecordOf is where and what serve records for ev, posted to at, in the fleet repo
// declares: the cluster repo for flux-system, the cluster's workspace repo for its workspace's
// namespace. ok is false, with why, for an event that names no git commit (nothing to record);
// an endpoint the control repo does not know is ErrHealthUnknown.
func HealthRecordOf(repo *ControlRepo, ev HealthEvent, at HealthEndpoint) (rec HealthRecord, ok bool, why string, err error) {
	c := repo.Cluster(at.Cluster)
	if c == nil {
		return rec, false, "", fmt.Errorf("%w: cluster %s is not in the control repo", ErrHealthUnknown, at.Cluster)
	}
	rec.Owner, rec.Repo = repo.Fleet().Owner, repo.ClusterRepo(at.Cluster)
	if at.Namespace != "" {
		ws := workspaceOf(repo, c)
		if ws == nil || ws.Namespace() != at.Namespace {
			return rec, false, "", fmt.Errorf("%w: namespace %s is not the namespace of cluster %s's workspace", ErrHealthUnknown, at.Namespace, at.Cluster)
		}
		rec.Repo = repo.WorkspaceRepo(ws.Metadata.Name)
	}
	rec.Commit, rec.Status, ok, why = ev.CommitStatus(at)
	return rec, ok, why, nil
}

// workspaceOf is the workspace cluster c belongs to, nil when none.
func workspaceOf(repo *ControlRepo, c *control.Cluster) *control.Workspace {
	for _, w := range repo.Workspaces {
		if c.Spec.Workspace != "" && w.Metadata.Name == c.Spec.Workspace {
			return w
		}
	}
	return nil
}
