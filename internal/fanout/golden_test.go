package fanout

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const (
	exampleDir = "../../testdata/control"
	goldenDir  = "../../testdata/golden"
)

// loadExample loads the example control repo.
func loadExample(t testing.TB) *control.Repo {
	t.Helper()
	repo, err := control.LoadDir(exampleDir)
	require.NoError(t, err, "loading %s", exampleDir)
	return repo
}

// tree is every file of the desired state of all targets, keyed by
// "<repo>/<path>", plus targets.json describing each target.
func tree(t testing.TB, targets []*Target) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	type summary struct {
		*Target
		Managed   []string `json:"managed"`
		Scaffolds []string `json:"scaffolds"`
	}
	var sums []summary
	for _, tg := range targets {
		s := summary{Target: tg}
		for p, data := range tg.Files {
			out[tg.Repo+"/"+p] = data
			s.Managed = append(s.Managed, p)
		}
		for p, data := range tg.Scaffolds {
			out[tg.Repo+"/"+p] = data
			s.Scaffolds = append(s.Scaffolds, p)
		}
		sort.Strings(s.Managed)
		sort.Strings(s.Scaffolds)
		sums = append(sums, s)
	}
	data, err := json.MarshalIndent(sums, "", "  ")
	require.NoError(t, err)
	out["targets.json"] = append(data, '\n')
	return out
}

// TestGolden renders the example control repo and compares every file of
// every target repo with testdata/golden. Refresh with
// `go test ./internal/fanout -update`.
func TestGolden(t *testing.T) {
	t.Parallel()
	targets, err := NewRenderer(Options{}).Render(loadExample(t))
	require.NoError(t, err)
	got := tree(t, targets)

	if *update {
		require.NoError(t, os.RemoveAll(goldenDir))
		for p, data := range got {
			file := filepath.Join(goldenDir, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, data, 0o644))
		}
		return
	}

	want := readGolden(t, goldenDir)

	for _, p := range slices.Sorted(maps.Keys(got)) {
		t.Run(p, func(t *testing.T) {
			w, ok := want[p]
			if !ok {
				t.Fatalf("%s is rendered but has no golden file (run with -update)", p)
			}
			if d := lineDiff(string(w), string(got[p])); d != "" {
				t.Errorf("%s differs from its golden file (-want +got):\n%s", p, d)
			}
		})
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[p]; !ok {
			t.Errorf("golden file %s is no longer rendered (run with -update)", p)
		}
	}
}

// lineDiff is a small line diff (longest common subsequence) with two lines
// of context and line numbers, enough to read a golden mismatch; "" when
// equal.
func lineDiff(a, b string) string {
	if a == b {
		return ""
	}
	x, y := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		tag  byte // ' ', '-', '+'
		line int  // line number in want (' ', '-') or got ('+')
		text string
	}
	var ops []op
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', i + 1, x[i]})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, op{'+', j + 1, y[j]})
			j++
		default:
			ops = append(ops, op{'-', i + 1, x[i]})
			i++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1
	for k, o := range ops {
		near := false
		for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
			near = near || ops[d].tag != ' '
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			out.WriteString("    ...\n")
		}
		last = k
		fmt.Fprintf(&out, "%c%4d  %s\n", o.tag, o.line, strings.TrimSuffix(o.text, "\n"))
	}
	return out.String()
}

// readGolden reads every file under dir, keyed by its slash path relative to dir.
func readGolden(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		want[filepath.ToSlash(rel)] = data
		return err
	})
	require.NoError(t, err, "reading golden files (run with -update to create them)")
	return want
}
