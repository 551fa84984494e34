package review

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// delegated lets the teams that own a cluster file by the control repo's
// CODEOWNERS add or change it, which platform admins otherwise must do,
// as long as the change leaves spec.provision.deletionPolicy alone: whether
// removing a cluster destroys its machines stays platform admins' decision,
// as do provision profiles and management clusters (platform.yaml) and the
// removal of a cluster file. CODEOWNERS delegates paths, and a cluster's name
// is its path (control.Load refuses clusters/a.yaml naming cluster b), so the
// name a team may create is the one its path names; a name with a past or a
// role of its own stays platform admins' to give: a retired cluster's
// (spec.retiredClusters of the base: its kubeconfig Secret and HelmRelease are
// retained on the management cluster, and the new file would point the hub at
// them) or a management cluster's. fc is judge's verdict for the path.
func delegated(fc FileChange, c fileDiff, base, head *control.Repo, m *membership) FileChange {
	if fc.Allowed || base == nil || head == nil || !strings.HasPrefix(c.path, "clusters/") || (c.op != OpAdded && c.op != OpChanged) {
		return fc
	}
	rule, _ := base.Codeowners.Owner(c.path)
	teams, pattern := rule.Teams(), rule.Pattern
	teams = slices.DeleteFunc(teams, func(t string) bool { return slices.Contains(base.Platform.Spec.Admins, t) })
	if len(teams) == 0 {
		return fc
	}
	hc, bc := clusterIn(head, c.path), clusterIn(base, c.path)
	if hc == nil {
		return fc
	}
	if deletionPolicy(hc) != deletionPolicy(bc) {
		fc.Reason = "only platform admins may set or change spec.provision.deletionPolicy: it decides whether removing the cluster destroys its machines"
		return fc
	}
	if reason := nameWithAPast(hc, c.path, base); reason != "" {
		fc.Reason = reason
		return fc
	}
	if reason := workspaceMove(c.path, bc, hc, base, head, m); reason != "" {
		fc.Reason = reason
		return fc
	}
	owner := "code owners of " + c.path + " (" + pattern + ")"
	if team, ok := m.in(teams); ok {
		fc.Owner, fc.Allowed = owner, true
		fc.Reason = "team " + team + " owns " + c.path + " by the control repo's CODEOWNERS (" + pattern + "); the change leaves spec.provision.deletionPolicy alone"
		return fc
	}
	fc.Owner = owner
	fc.Reason = "only platform admins or the owners of " + c.path + " by the control repo's CODEOWNERS (" + strings.Join(teams, ", ") + ") may add or change it"
	return fc
}

// workspaceMove says why a delegated team may not make the change of the cluster at file from
// bc (nil: added) to hc to spec.workspace, or "": a workspace's apps, with their Secrets and
// ConfigMaps, run on every cluster of the workspace, and the cluster's admins hold
// cluster-admin there, so adopting a cluster into a workspace (or taking it out of one) is the
// workspace admins' decision as well as the cluster's owners': the author must be a workspace
// admin of the workspace it leaves and of the one it joins.
func workspaceMove(file string, bc, hc *control.Cluster, base, head *control.Repo, m *membership) string {
	from := ""
	if bc != nil {
		from = bc.Spec.Workspace
	}
	to := hc.Spec.Workspace
	if from == to {
		return ""
	}
	for _, side := range []struct {
		name, verb string
		repo       *control.Repo
	}{{from, "takes it out of", base}, {to, "adopts it into", head}} {
		if side.name == "" {
			continue
		}
		w := side.repo.Workspace(side.name)
		if w == nil {
			continue // the head does not validate, or the workspace goes too: platform admins' change
		}
		if _, ok := m.in(w.Spec.Admins); !ok {
			return fmt.Sprintf("%s %s workspace %s (spec.workspace): the workspace's apps and their secrets run on every cluster of the workspace, whose admins hold cluster-admin there, so only platform admins or the workspace admins of %s (%s) may change it",
				file, side.verb, side.name, side.name, strings.Join(w.Spec.Admins, ", "))
		}
	}
	return ""
}

func clusterIn(r *control.Repo, file string) *control.Cluster {
	if r == nil {
		return nil
	}
	for _, c := range r.Clusters {
		if c.Source.File == file {
			return c
		}
	}
	return nil
}

func deletionPolicy(c *control.Cluster) string {
	if c == nil || c.Spec.Provision == nil {
		return ""
	}
	return c.Spec.Provision.DeletionPolicy
}

// nameWithAPast says why the name of cluster c, added or changed at file, is not a delegated
// team's to take, or "": it is not the file's (the head does not validate then), it is a
// retired cluster's whose objects are retained, or it is a management cluster's.
func nameWithAPast(c *control.Cluster, file string, base *control.Repo) string {
	name := c.Metadata.Name
	if stem := strings.TrimSuffix(strings.TrimSuffix(path.Base(file), ".yaml"), ".yml"); stem != name {
		return fmt.Sprintf("%s names cluster %q, not %q: only the cluster its path names may be defined there", file, name, stem)
	}
	if slices.Contains(base.Platform.Spec.RetiredClusters, name) {
		return fmt.Sprintf("%s re-uses the name of retired cluster %s (spec.retiredClusters in platform.yaml): its objects are retained (deletionPolicy Retain keeps its HelmRelease and kubeconfig Secret), so only platform admins may give the name again", file, name)
	}
	if base.ManagementCluster(name) != nil {
		return fmt.Sprintf("%s takes the name of management cluster %s (spec.managementClusters in platform.yaml): only platform admins may define it", file, name)
	}
	return ""
}

// retirementIssues lists the clusters the change removes whose provisioned objects are
// retained (deletionPolicy Retain) and that the head does not record in spec.retiredClusters:
// without the record, nobody would know later that the name still has a HelmRelease and a
// kubeconfig Secret on its management cluster, and a new file of that name would take them.
func retirementIssues(base, head *control.Repo) control.Issues {
	var is control.Issues
	if base == nil || head == nil || head.Platform == nil {
		return nil
	}
	for _, c := range base.Clusters {
		if head.Cluster(c.Metadata.Name) != nil || c.Spec.Provision == nil || c.Spec.Provision.Policy() != control.DeletionRetain {
			continue
		}
		if slices.Contains(head.Platform.Spec.RetiredClusters, c.Metadata.Name) {
			continue
		}
		is.Add(head.Platform.Source.At("spec.retiredClusters"),
			fmt.Sprintf("add it to platform.yaml:\n      spec:\n        retiredClusters: [%s]", c.Metadata.Name),
			"cluster %s is removed (%s) with deletionPolicy Retain: its HelmRelease and kubeconfig Secret stay on management cluster %s, so its name must be recorded in spec.retiredClusters",
			c.Metadata.Name, c.Source.File, c.Spec.Provision.ManagementCluster)
	}
	return is
}
