package bench

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetbot-io/fleetbot/internal/app"
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
		r := fanout.NewRenderer(fanout.Options{})
		repo, err := app.LoadDir(context.Background(), r, dir)
		if err != nil {
			b.Fatal(err)
		}
		targets, err := r.Render(repo)
		if err != nil || len(targets) == 0 {
			b.Fatalf("render: %v", err)
		}
	}
}

func BenchmarkFullRender1000x20(b *testing.B)  { benchFullRender(b, 1000) }
func BenchmarkFullRender10000x20(b *testing.B) { benchFullRender(b, 10000) }

// BenchmarkPushOneCluster1000x20 is the CPU side of a one-cluster push to a warm service
// (docs/benchmarks.md row 5): the control repo, in memory, has one cluster's address range
// changed; it is loaded and validated again (with serve's cache of decoded cluster files),
// rendered by the warm Renderer, every target is
// fingerprinted (reconcile's baseline digests) and compared with the previous render. What is
// left of the push is requests: reading the control repo's head, tree and changed blob, and
// the writes of the one changed repo.
func BenchmarkPushOneCluster1000x20(b *testing.B) {
	fsys := fleetgen.Generate(fleetgen.Options{Clusters: 1000, Apps: 20, Seed: 1})
	var file string
	for p, f := range fsys {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), ".0/24") && (file == "" || p < file) {
			file = p
		}
	}
	if file == "" {
		b.Fatal("no cluster with an address range")
	}
	r := fanout.NewRenderer(fanout.Options{})
	cache := control.NewCache(0)
	repo, err := control.LoadCached(fsys, cache)
	if err != nil {
		b.Fatal(err)
	}
	prev, err := r.Render(repo)
	if err != nil {
		b.Fatal(err)
	}
	orig := fsys[file].Data
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		data := orig
		if i%2 == 0 {
			data = []byte(strings.Replace(string(orig), ".0/24", ".0/25", 1))
		}
		fsys[file] = &fstest.MapFile{Data: data}
		repo, err := control.LoadCached(fsys, cache)
		if err != nil {
			b.Fatal(err)
		}
		next, err := r.Render(repo)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range next {
			_ = fanout.Digest(t)
		}
		if changed, _ := fanout.Changed(prev, next); len(changed) != 1 {
			b.Fatalf("%d repos changed, want 1", len(changed))
		}
		prev = next
	}
}
