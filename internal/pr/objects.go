package pr

import (
	"github.com/fleetbot-io/fleetbot/internal/manifest"
)

// ObjectCounts counts object changes of one kind.
type ObjectCounts struct {
	Added   int `json:"added"`
	Changed int `json:"changed"`
	Removed int `json:"removed"`
}

// SummarizeObjects counts object changes per kind; nil when nothing changes.
func SummarizeObjects(c manifest.Changes) map[string]ObjectCounts {
	if c.Empty() {
		return nil
	}
	sum := map[string]ObjectCounts{}
	for k, n := range manifest.CountByKind(c.Added) {
		oc := sum[k]
		oc.Added = n
		sum[k] = oc
	}
	for k, n := range manifest.CountByKind(c.Changed) {
		oc := sum[k]
		oc.Changed = n
		sum[k] = oc
	}
	for k, n := range manifest.CountByKind(c.Removed) {
		oc := sum[k]
		oc.Removed = n
		sum[k] = oc
	}
	return sum
}

// DiffObjects compares the Kubernetes objects of the manifests that differ:
// old holds the previous content of changed and removed files, new the
// desired content of added and changed ones. Unchanged files are not read.
func DiffObjects(files []FileChange, old, new map[string][]byte) manifest.Changes {
	before, after := map[string][]byte{}, map[string][]byte{}
	for _, f := range files {
		if !manifest.IsManifestPath(f.Path) {
			continue
		}
		if f.Op != FileAdded {
			before[f.Path] = old[f.Path]
		}
		if f.Op != FileRemoved {
			after[f.Path] = new[f.Path]
		}
	}
	c := manifest.Diff(before, after)
	c.Added, c.Changed, c.Removed = manifest.OnCluster(c.Added), manifest.OnCluster(c.Changed), manifest.OnCluster(c.Removed)
	return c
}
