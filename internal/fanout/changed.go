package fanout

import (
	"bytes"
	"reflect"
	"slices"
)

// Changed compares two renders of a control repo (an earlier one and the
// current one) and lists, by repo name, the targets whose desired state
// differs: new targets, and targets whose files, scaffolds, access,
// reviewers, default branch or visibility changed. Targets present only in
// prev are listed in removed. A service keeps the previous render and plans
// only the changed repos (reconcile Options.Only) after a push to the
// control repo, instead of reading every target repo; removals need a full
// run, where the removal guard sees the whole fleet.
func Changed(prev, next []*Target) (changed, removed []string) {
	old := make(map[string]*Target, len(prev))
	for _, t := range prev {
		old[t.Repo] = t
	}
	seen := make(map[string]bool, len(next))
	for _, t := range next {
		seen[t.Repo] = true
		if o, ok := old[t.Repo]; !ok || !sameTarget(o, t) {
			changed = append(changed, t.Repo)
		}
	}
	for _, t := range prev {
		if !seen[t.Repo] {
			removed = append(removed, t.Repo)
		}
	}
	slices.Sort(changed)
	slices.Sort(removed)
	return changed, removed
}

// sameTarget reports whether two renders of one target want the same repo.
// File contents of unchanged apps are usually the same slice in both
// renders, which bytes.Equal answers without reading them.
func sameTarget(a, b *Target) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Owner == b.Owner && a.Removed == b.Removed &&
		a.DefaultBranch == b.DefaultBranch && a.Visibility == b.Visibility &&
		sameFiles(a.Files, b.Files) && sameFiles(a.Scaffolds, b.Scaffolds) &&
		slices.Equal(a.Reviewers, b.Reviewers) && reflect.DeepEqual(a.Access, b.Access)
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		y, ok := b[p]
		if !ok || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}
