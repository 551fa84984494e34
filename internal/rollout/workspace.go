package rollout

import (
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// Workspace is one workspace repo the gate weighs, as the run decided it and the forge shows
// it. A workspace repo serves every cluster of the workspace at once, so its change goes with
// the last wave of its clusters: it counts as a change of the workspace's clusters in that wave
// (its carriers), whose wave is not done until it merged and, with the generic-hmac health
// provider (which watches the workspace namespace's Kustomizations and HelmReleases), Flux
// reported it healthy on each of them.
type Workspace struct {
	// Name is the workspace's name in the control repo, Repo its repo (without the owner).
	Name, Repo string
	// Decision is the run's pull-request decision for the repo (nil: not planned).
	Decision *pr.Decision
	// PR is fleetbot's newest pull request of the repo when Found.
	PR    pr.RolloutPR
	Found bool
}

// asCluster is w in the shape observe and rolledBackFailure read.
func (w Workspace) asCluster() Cluster {
	return Cluster(w)
}

// workspaceChanged reports whether any workspace repo takes part in the revision.
func workspaceChanged(workspaces []Workspace, revision string) bool {
	for _, w := range workspaces {
		if o, _ := observe(w.asCluster(), revision); o.Changed {
			return true
		}
	}
	return false
}

// attachWorkspaces folds each changed workspace repo into the observation of its carriers:
// the workspace's clusters in the last of the plan's waves holding any of them. A carrier whose
// own repo is unchanged is changed by its workspace; one whose repo changed too is done when
// both merged, and failed when either failed.
func attachWorkspaces(ctl *control.Repo, plan Plan, workspaces []Workspace, revision string, obs map[string]Observed) {
	waveOf := map[string]int{}
	for i, w := range plan.Waves {
		for _, c := range w.Clusters {
			waveOf[c] = i
		}
	}
	watched := ctl.HealthDelivery().Provider == control.HealthGenericHMAC
	for _, w := range workspaces {
		o, _ := observe(w.asCluster(), revision)
		if !o.Changed {
			continue
		}
		ns := ""
		if ws := ctl.Workspace(w.Name); ws != nil {
			ns = ws.Namespace()
		}
		for _, c := range carriers(ctl, w.Name, waveOf) {
			p := workspacePR(o.PR, w, c, ns, watched)
			if p != nil && p.Merged && p.Health == HealthUnknown && w.PR.Source != revision {
				// An earlier revision's merge of the very tree this one renders, on which
				// nothing was ever reported from c's workspace namespace: merged before its
				// health was watched (the github provider, or before generic-hmac), it is
				// not this revision's to wait for.
				continue
			}
			obs[c] = combine(obs[c], Observed{Changed: true, PR: p})
		}
	}
}

// carriers are the clusters of workspace in the last wave that holds any of them.
func carriers(ctl *control.Repo, workspace string, waveOf map[string]int) []string {
	last := -1
	var members []string
	for _, c := range ctl.Clusters {
		i, ok := waveOf[c.Metadata.Name]
		if !ok || c.Spec.Workspace != workspace {
			continue
		}
		members = append(members, c.Metadata.Name)
		last = max(last, i)
	}
	var out []string
	for _, c := range members {
		if waveOf[c] == last {
			out = append(out, c)
		}
	}
	return out
}

// workspacePR is the workspace repo's pull request as cluster c sees it: named by its repo, and,
// once merged, healthy or failed as Flux reported it from c's workspace namespace (the statuses
// serve records for /health/<c>/<namespace>). Without a provider watching the workspace
// namespace (the github Provider's Alert is flux-system's only) nothing reports on it: its merge
// counts as its verdict.
func workspacePR(p *PR, w Workspace, cluster, namespace string, watched bool) *PR {
	if p == nil {
		return nil
	}
	out := *p
	out.Repo = w.Repo
	if !out.Merged {
		return &out
	}
	if !watched {
		out.Health, out.HealthAt = HealthSuccess, out.MergedAt
		return &out
	}
	suffix := "/" + endpointID(HealthEndpoint{Cluster: cluster, Namespace: namespace})
	own := func(sts []pr.CommitStatus) []pr.CommitStatus {
		var mine []pr.CommitStatus
		for _, s := range sts {
			if strings.HasSuffix(s.Context, suffix) {
				mine = append(mine, s)
			}
		}
		return mine
	}
	out.Health, out.HealthAt = HealthOf(own(w.PR.Statuses))
	if out.Health == HealthUnknown && w.PR.Head != "" {
		out.Health, out.HealthAt = HealthOf(own(w.PR.HeadStatuses))
	}
	return &out
}

// combine is a cluster's observation with its workspace's: changed when either is; the pull
// request the wave weighs is the one still to act on: none while the cluster repo's new one is
// still to open (the cluster is a candidate of its wave, held with it: the workspace's open pull
// request is updated in place all the same, and never admits the cluster's new one), an open
// one (updated in place), else both merges as one: the later merge, the worse verdict. A failed
// merge is weighed whatever the other repo's state.
func combine(cl, ws Observed) Observed {
	if !cl.Changed {
		return ws
	}
	out := Observed{Changed: true}
	a, b := cl.PR, ws.PR
	switch {
	case a != nil && a.Open:
		out.PR = a
	case a != nil && b != nil && b.Open:
		out.PR = b
	case a == nil || b == nil:
		// A repo's pull request is still to open: the cluster is a candidate, unless the
		// other's merge already failed.
		for _, p := range []*PR{a, b} {
			if p != nil && p.Merged && p.Health == HealthFailure {
				out.PR = p
			}
		}
	default:
		// Both merged (observe keeps a merged pull request only when it carries the revision).
		out.PR = worse(a, b)
	}
	return out
}

// worse is two merges of one revision as one: failed when either failed (dated by the first
// failure), waiting while either waits (merged when the later merged), else healthy when the
// later became healthy.
func worse(a, b *PR) *PR {
	m := *a
	if b.MergedAt.After(m.MergedAt) {
		m.MergedAt = b.MergedAt
	}
	rank := func(h Health) int {
		return map[Health]int{HealthFailure: 0, HealthUnknown: 1, HealthPending: 2, HealthSuccess: 3}[h]
	}
	switch {
	case rank(b.Health) < rank(a.Health):
		m.Health, m.HealthAt, m.Number, m.Repo = b.Health, b.HealthAt, b.Number, b.Repo
	case b.Health == a.Health && a.Health == HealthSuccess && b.HealthAt.After(a.HealthAt):
		m.HealthAt = b.HealthAt
	case b.Health == a.Health && a.Health == HealthFailure && b.HealthAt.Before(a.HealthAt):
		m.HealthAt, m.Number, m.Repo = b.HealthAt, b.Number, b.Repo
	}
	return &m
}
