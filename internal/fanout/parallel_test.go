package fanout

import (
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// TestRenderOnSeveralGoroutines: laying targets out on several goroutines renders the bytes
// one goroutine renders, and reports the same problems, whatever the number of goroutines.
func TestRenderOnSeveralGoroutines(t *testing.T) {
	t.Parallel()
	gen := fleetgen.Generate(fleetgen.Options{Clusters: 300, Apps: 8, Seed: 4})
	render := func(fsys fstest.MapFS, workers int) ([]*Target, error) {
		repo, err := control.Load(fsys)
		require.NoError(t, err)
		r := NewRenderer(Options{})
		r.forceWorkers = workers
		return r.Render(repo)
	}
	want, err := render(gen, 1)
	require.NoError(t, err)
	require.Greater(t, len(want), 300)
	for _, workers := range []int{2, 3, 7} {
		got, err := render(gen, workers)
		require.NoError(t, err)
		assertSameTree(t, tree(t, want), tree(t, got), "%d goroutines", workers)
	}

	// A problem every goroutine finds (the platform's Flux interval, which a Repo built other
	// than by control.Load may hold): reported once, as by one goroutine.
	repo, err := control.Load(gen)
	require.NoError(t, err)
	repo.Platform.Spec.Flux.Interval = "soon"
	var once string
	for _, workers := range []int{1, 2, 7} {
		r := NewRenderer(Options{})
		r.forceWorkers = workers
		_, err := r.Render(repo)
		require.Error(t, err)
		assert.Equal(t, 1, strings.Count(err.Error(), `flux interval "soon"`), "%d goroutines: %v", workers, err)
		if once == "" {
			once = err.Error()
		}
		assert.Equal(t, once, err.Error(), "%d goroutines", workers)
	}

	// Values that turn a scalar into a list, on clusters each goroutine lays out.
	var metal []string
	for p, f := range gen {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), "metallb_range: ") {
			metal = append(metal, p)
		}
	}
	sort.Strings(metal)
	require.Greater(t, len(metal), 10)
	bad := fstest.MapFS{}
	for p, f := range gen {
		bad[p] = f
	}
	rangeRe := regexp.MustCompile(`metallb_range: .*`)
	for _, p := range []string{metal[0], metal[len(metal)/2], metal[len(metal)-1]} {
		bad[p] = &fstest.MapFile{Data: rangeRe.ReplaceAll(gen[p].Data, []byte(`metallb_range: "[1, 2]"`))}
	}
	_, wantErr := render(bad, 1)
	var issues control.Issues
	require.ErrorAs(t, wantErr, &issues)
	require.GreaterOrEqual(t, len(issues), 3, "%v", wantErr)
	for _, workers := range []int{2, 3, 7} {
		targets, err := render(bad, workers)
		assert.Nil(t, targets)
		require.Error(t, err)
		assert.Equal(t, wantErr.Error(), err.Error(), "%d goroutines", workers)
	}
}
