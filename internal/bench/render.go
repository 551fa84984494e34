package bench

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// RenderResult is one full render of a generated control repo, as the CLI
// does it: read the directory, load and validate, render every target.
type RenderResult struct {
	Clusters, Workspaces, Apps int
	// Deployments is the number of (cluster, app) pairs.
	Deployments int
	// Targets and Files are the rendered repos and their files (managed and
	// scaffolds).
	Targets, Files int
	// Load is app.LoadDir, as the CLI loads: control.LoadDir (read, decode, validate) with a
	// new Renderer's kustomize builds running beside it; Render is the rest of that
	// Renderer's Render.
	Load, Render time.Duration
	// Builds is the number of kustomize builds the render executed.
	Builds int
	// HeapPeak is the peak Go heap during load and render, sampled.
	HeapPeak uint64
}

// Total is the wall time of load and render.
func (r RenderResult) Total() time.Duration { return r.Load + r.Render }

// Render loads the control repo in dir and renders it with a cold Renderer.
func Render(dir string) (*RenderResult, error) {
	hs := StartHeapSampler(5 * time.Millisecond)
	r := fanout.NewRenderer(fanout.Options{})
	start := time.Now()
	repo, err := app.LoadDir(context.Background(), r, dir)
	if err != nil {
		hs.Stop()
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	loaded := time.Now()
	targets, err := r.Render(repo)
	if err != nil {
		hs.Stop()
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	done := time.Now()
	res := &RenderResult{
		Clusters: len(repo.Clusters), Workspaces: len(repo.Workspaces), Apps: len(repo.Apps), Targets: len(targets),
		Load: loaded.Sub(start), Render: done.Sub(loaded), Builds: r.Stats().Builds,
	}
	res.HeapPeak = hs.Stop()
	for _, t := range targets {
		res.Files += len(t.Files) + len(t.Scaffolds)
	}
	// Counting the deployments builds the list of them again (a values map each: about as
	// much memory as the render's live targets at 10,000 clusters). It is no part of what is
	// measured: do it once the render's memory is free, so it does not add to the process's
	// peak RSS the row reports.
	targets = nil
	runtime.GC()
	res.Deployments = len(repo.Deployments())
	return res, nil
}

// NaiveResult is the cost of the naive way: one kustomize build per
// (cluster, app), which is what one Flux Kustomization per cluster and app
// does, on a sample of the fleet's clusters.
type NaiveResult struct {
	// SampleClusters of Clusters were built: SampleDeployments builds of
	// Deployments in the whole fleet.
	Clusters, SampleClusters       int
	Deployments, SampleDeployments int
	// Sample is the wall time of the sample's builds.
	Sample time.Duration
}

// PerBuild is the mean time of one naive build.
func (n NaiveResult) PerBuild() time.Duration {
	if n.SampleDeployments == 0 {
		return 0
	}
	return n.Sample / time.Duration(n.SampleDeployments)
}

// Estimate extrapolates the sample linearly to every deployment of the
// fleet (exact when the sample is the whole fleet).
func (n NaiveResult) Estimate() time.Duration {
	return n.PerBuild() * time.Duration(n.Deployments)
}

// Naive runs one kustomize build per deployment of the first sample
// clusters (in name order) of the control repo in dir, each on a fresh
// in-memory filesystem holding the app's files, with the options fanout
// uses. Substituting values afterwards (Flux postBuild) is not counted, so
// the naive cost is a lower bound.
func Naive(dir string, sample int) (*NaiveResult, error) {
	repo, err := control.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	deps := repo.Deployments()
	res := &NaiveResult{Clusters: len(repo.Clusters), Deployments: len(deps)}
	todo, clusters := sampleDeployments(deps, sample)
	res.SampleClusters, res.SampleDeployments = clusters, len(todo)

	ko := krusty.MakeDefaultOptions()
	ko.PluginConfig = types.DisabledPluginConfig()
	ko.LoadRestrictions = types.LoadRestrictionsRootOnly
	ko.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(ko)
	// Close every app first, outside the timing: the naive build must not
	// clone or fetch either.
	closed := map[string]map[string][]byte{}
	for _, d := range todo {
		name := d.App.Metadata.Name
		if _, ok := closed[name]; ok {
			continue
		}
		files, err := fanout.CloseApp(d.App.Files)
		if err != nil {
			return nil, fmt.Errorf("app %s: %w", name, err)
		}
		closed[name] = files
	}
	start := time.Now()
	for _, d := range todo {
		fs := filesys.MakeFsInMemory()
		for p, data := range closed[d.App.Metadata.Name] {
			if err := fs.WriteFile(path.Join("/app", p), data); err != nil {
				return nil, fmt.Errorf("staging %s: %w", p, err)
			}
		}
		if _, err := k.Run(fs, "/app"); err != nil {
			return nil, fmt.Errorf("building app %s for cluster %s: %w", d.App.Metadata.Name, d.Cluster.Metadata.Name, err)
		}
	}
	res.Sample = time.Since(start)
	return res, nil
}

// sampleDeployments keeps the deployments of the first sample clusters (in
// the order deps lists them) and says how many clusters that is.
func sampleDeployments(deps []control.Deployment, sample int) ([]control.Deployment, int) {
	picked := map[string]bool{}
	var todo []control.Deployment
	for _, d := range deps {
		name := d.Cluster.Metadata.Name
		if !picked[name] {
			if len(picked) == sample {
				continue
			}
			picked[name] = true
		}
		todo = append(todo, d)
	}
	return todo, len(picked)
}
