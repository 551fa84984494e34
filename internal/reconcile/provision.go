package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// provisionPlan says in words, for a management repo's plan, what each
// changed provision/clusters/<cluster>.yaml does to real infrastructure:
// a new cluster, a value change (scale, upgrade), or a removal, which
// either orphans the cluster (deletion policy Retain as merged: its objects
// carry kustomize.toolkit.fluxcd.io/prune: disabled, so Flux deletes
// nothing) or destroys its machines through Cluster API (Delete as merged).
// The policy that decides is the one on the default branch, read from the
// current HelmRelease's annotation: setting Delete and removing the cluster
// in one change is impossible (the cluster file is gone), so Delete must
// have been merged before. It returns the lines and how many clusters the
// plan destroys, which count against the removal guard.
func provisionPlan(ctx context.Context, f pr.Forge, t *fanout.Target, d *pr.Decision) ([]string, int, error) {
	var lines []string
	destroyed := 0
	for _, fc := range d.Files {
		dir, file := path.Split(fc.Path)
		if dir != fanout.ProvisionClustersDir+"/" || !strings.HasSuffix(file, ".yaml") {
			continue
		}
		name := strings.TrimSuffix(file, ".yaml")
		var old, cur *release
		if fc.Op != pr.FileAdded && fc.OldHash != "" {
			data, err := f.Blob(ctx, t.Owner, t.Repo, fc.OldHash)
			if err != nil {
				return nil, 0, fmt.Errorf("reading %s on the default branch of %s: %w", fc.Path, t.FullName(), err)
			}
			if old, err = parseRelease(data); err != nil {
				// A hand edit fleetbot's PR is about to overwrite: say so, and
				// assume the worst of a removal (the policy on the cluster is
				// unknown), so it counts against the removal guard.
				if _, ok := t.Files[fc.Path]; ok {
					lines = append(lines, fmt.Sprintf("%s: the HelmRelease on the default branch cannot be read (%v); the PR rewrites it", name, err))
					continue
				}
				destroyed++
				lines = append(lines, fmt.Sprintf("removing cluster %s may destroy its machines: the HelmRelease on the default branch cannot be read (%v), so its deletion policy is unknown; check the management cluster before merging", name, err))
				continue
			}
		}
		if data, ok := t.Files[fc.Path]; ok {
			var err error
			if cur, err = parseRelease(data); err != nil {
				return nil, 0, fmt.Errorf("rendered %s of %s: %w", fc.Path, t.FullName(), err)
			}
		}
		switch {
		case old == nil && cur != nil:
			lines = append(lines, fmt.Sprintf("%s: new cluster on management cluster %s: %s", name, t.Name, cur.summary()))
		case old != nil && cur == nil:
			if old.policy == control.DeletionDelete {
				destroyed++
				lines = append(lines, fmt.Sprintf("deleting cluster %s destroys its %s through Cluster API (deletion policy Delete, as merged)", name, old.machines()))
			} else {
				lines = append(lines, fmt.Sprintf("removing cluster %s orphans it: deletion policy %s (as merged) keeps its HelmRelease, so Cluster API destroys none of its %s; "+
					"to destroy it, first merge spec.provision.deletionPolicy: Delete, then remove it", name, or(old.policy, control.DeletionRetain), old.machines()))
			}
		case old != nil && cur != nil:
			if diff := old.diff(cur); diff != "" {
				lines = append(lines, name+": "+diff)
			}
		}
	}
	return lines, destroyed, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// release is what plan reads of a provisioned cluster's HelmRelease.
type release struct {
	policy string
	// values flattens the chart values: node pools by name
	// (nodePools.<pool>.count), other scalars by their dotted path.
	values map[string]string
	pools  []string // node pool names, in order
	counts map[string]int
}

var errNoRelease = errors.New("no HelmRelease in the file")

// parseRelease finds the HelmRelease of a provision/clusters file.
func parseRelease(data []byte) (*release, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				Chart struct {
					Spec struct {
						Chart   string `yaml:"chart"`
						Version string `yaml:"version"`
					} `yaml:"spec"`
				} `yaml:"chart"`
				ChartRef struct {
					Name string `yaml:"name"`
				} `yaml:"chartRef"`
				Values map[string]any `yaml:"values"`
			} `yaml:"spec"`
		}
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil, errNoRelease
		}
		if err != nil {
			return nil, fmt.Errorf("parsing: %w", err)
		}
		if doc.Kind != "HelmRelease" {
			continue
		}
		r := &release{policy: doc.Metadata.Annotations[fanout.DeletionPolicyAnnotation], values: map[string]string{}, counts: map[string]int{}}
		if c := doc.Spec.Chart.Spec; c.Chart != "" {
			r.values["chart"] = c.Chart + " " + c.Version
		}
		if n := doc.Spec.ChartRef.Name; n != "" {
			r.values["chart"] = "source " + n
		}
		for k, v := range doc.Spec.Values {
			if k == control.ValueNodePools {
				pools, _ := v.([]any)
				for _, p := range pools {
					m, _ := p.(map[string]any)
					pn := fmt.Sprint(m["name"])
					r.pools = append(r.pools, pn)
					for pk, pv := range m {
						if pk == "name" {
							continue
						}
						r.values["nodePools."+pn+"."+pk] = fmt.Sprint(pv)
					}
					if n, err := strconv.Atoi(fmt.Sprint(m["count"])); err == nil {
						r.counts[pn] = n
					}
				}
				continue
			}
			flatten(k, v, r.values)
		}
		return r, nil
	}
}

func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			flatten(prefix+"."+k, x, out)
		}
		return
	}
	out[prefix] = fmt.Sprint(v)
}

// machines says how many node pools and machines the release asks for.
func (r *release) machines() string {
	total := 0
	for _, n := range r.counts {
		total += n
	}
	pools := "node pools"
	if len(r.pools) == 1 {
		pools = "node pool"
	}
	machines := "machines"
	if total == 1 {
		machines = "machine"
	}
	return fmt.Sprintf("%d %s (%d %s)", len(r.pools), pools, total, machines)
}

func (r *release) summary() string {
	var parts []string
	if v := r.values[control.ValueKubernetesVersion]; v != "" {
		parts = append(parts, "Kubernetes "+v)
	}
	parts = append(parts, r.machines(), "deletion policy "+or(r.policy, control.DeletionRetain))
	return strings.Join(parts, ", ")
}

// diff lists the values that change from r to n, as "path old → new",
// sorted; a value that appears or disappears shows as (none).
func (r *release) diff(n *release) string {
	keys := map[string]bool{}
	for k := range r.values {
		keys[k] = true
	}
	for k := range n.values {
		keys[k] = true
	}
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var parts []string
	for _, k := range sorted {
		a, aok := r.values[k]
		b, bok := n.values[k]
		if aok && bok && a == b {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s", k, or(a, "(none)"), or(b, "(none)")))
	}
	if r.policy != n.policy {
		parts = append(parts, fmt.Sprintf("deletionPolicy %s → %s", or(r.policy, control.DeletionRetain), or(n.policy, control.DeletionRetain)))
	}
	return strings.Join(parts, "; ")
}
