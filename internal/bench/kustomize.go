package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// KustomizeResult is the naive way measured with the real kustomize CLI: one
// `kustomize build` process per (cluster, app) on a sample of the fleet's clusters, which is
// what a per-cluster pipeline (or one Flux Kustomization per cluster and app) runs.
type KustomizeResult struct {
	NaiveResult
	// Version is `kustomize version`.
	Version string
}

// NaiveKustomize runs `binary build DIR` once per deployment of the first sample clusters (in
// name order) of the control repo in dir, DIR holding the app's closed files written once per
// app outside the timing. Substituting values afterwards (Flux postBuild) is not counted, so the
// figure is a lower bound of the naive cost.
func NaiveKustomize(dir, binary string, sample int) (*KustomizeResult, error) {
	out, err := exec.Command(binary, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", binary, err)
	}
	res := &KustomizeResult{Version: strings.TrimSpace(string(out))}
	repo, err := control.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	deps := repo.Deployments()
	res.Clusters, res.Deployments = len(repo.Clusters), len(deps)
	todo, clusters := sampleDeployments(deps, sample)
	res.SampleClusters, res.SampleDeployments = clusters, len(todo)
	work, err := os.MkdirTemp("", "fleetbot-bench-kustomize-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	appDirs := map[string]string{}
	for _, d := range todo {
		name := d.App.Metadata.Name
		if _, ok := appDirs[name]; ok {
			continue
		}
		files, err := fanout.CloseApp(d.App.Files)
		if err != nil {
			return nil, fmt.Errorf("app %s: %w", name, err)
		}
		root := filepath.Join(work, name)
		for p, data := range files {
			f := filepath.Join(root, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(f, data, 0o644); err != nil {
				return nil, err
			}
		}
		appDirs[name] = root
	}
	start := time.Now()
	for _, d := range todo {
		cmd := exec.Command(binary, "build", appDirs[d.App.Metadata.Name])
		cmd.Stdout = io.Discard
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("kustomize build of app %s for cluster %s: %w: %s", d.App.Metadata.Name, d.Cluster.Metadata.Name, err, stderr.String())
		}
	}
	res.Sample = time.Since(start)
	return res, nil
}
