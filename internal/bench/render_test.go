package bench

import (
	"testing"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// benchFullRender is row 1 of docs/benchmarks.md in a benchmark: read the
// generated control repo from disk, load and validate it, render every target
// with a cold Renderer. Run it with -benchtime=Nx -count and benchstat: the
// machine is shared, so allocation counts are the steadier figure.
func benchFullRender(b *testing.B, clusters int) {
	dir := b.TempDir()
	if err := fleetgen.WriteDir(dir, fleetgen.Options{Clusters: clusters, Apps: 20, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		repo, err := control.LoadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
		if err != nil || len(targets) == 0 {
			b.Fatalf("render: %v", err)
		}
	}
}

func BenchmarkFullRender1000x20(b *testing.B)  { benchFullRender(b, 1000) }
func BenchmarkFullRender10000x20(b *testing.B) { benchFullRender(b, 10000) }
