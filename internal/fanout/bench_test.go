package fanout

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// benchRender renders repo b.N times, cold (a new Renderer, so every app is
// built) or warm (one Renderer: the incremental case of a service), and
// reports kustomize builds per render.
func benchRender(b *testing.B, repo *control.Repo) {
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			r := NewRenderer(Options{})
			if warm {
				_, err := r.Render(repo)
				require.NoError(b, err)
			}
			before := r.Stats().Builds
			builds := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !warm {
					r = NewRenderer(Options{})
					before = 0
				}
				targets, err := r.Render(repo)
				if err != nil || len(targets) == 0 {
					b.Fatalf("render: %v", err)
				}
				builds += r.Stats().Builds - before
				before = r.Stats().Builds
			}
			b.ReportMetric(float64(builds)/float64(b.N), "kustomize-builds/op")
		})
	}
}

func BenchmarkRenderExample(b *testing.B) {
	benchRender(b, loadExample(b))
}

// BenchmarkRender1000x20 renders a generated fleet of 1,000 clusters and 20
// catalog apps: 16,480 deployments into 1,020 target repos (23,340 files).
func BenchmarkRender1000x20(b *testing.B) {
	repo, err := control.Load(fleetgen.Generate(fleetgen.Options{Clusters: 1000, Apps: 20, Seed: 1}))
	require.NoError(b, err)
	benchRender(b, repo)
}

// TestRenderGenerated renders generated fleets of a few shapes: every
// generated repo must render cleanly and deterministically.
func TestRenderGenerated(t *testing.T) {
	t.Parallel()
	for _, o := range []fleetgen.Options{{Clusters: 40, Apps: 20, Seed: 1}, {Clusters: 7, Workspaces: 3, Apps: 5, Seed: 2}, {Clusters: 2, Apps: 1}} {
		repo, err := control.Load(fleetgen.Generate(o))
		require.NoError(t, err)
		a := mustRender(t, NewRenderer(Options{}), repo)
		b := mustRender(t, NewRenderer(Options{}), repo)
		assertSameTree(t, tree(t, a), tree(t, b), "options %+v", o)
	}
}

// BenchmarkDigest1000x20 fingerprints every target of a 1,000 × 20 fleet, as an incremental
// run does once per push to compare with its baseline.
func BenchmarkDigest1000x20(b *testing.B) {
	repo, err := control.Load(fleetgen.Generate(fleetgen.Options{Clusters: 1000, Apps: 20, Seed: 1}))
	require.NoError(b, err)
	targets, err := NewRenderer(Options{}).Render(repo)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for _, t := range targets {
			_ = Digest(t)
		}
	}
}
