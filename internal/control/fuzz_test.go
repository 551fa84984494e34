package control

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"runtime"
	"testing"
	"testing/fstest"

	"github.com/fleetbot-io/fleetbot/internal/yamlsize"
)

// fuzzTargets are the control-repo files a fuzz input replaces, chosen by its first byte:
// every kind of object the loader decodes.
var fuzzTargets = []string{"platform.yaml", "clusters/fuzz.yaml", "workspaces/fuzz.yaml", "catalog/podinfo/app.yaml", "catalog/podinfo/fuzz.yaml",
	"rollout/approvals/fuzz.yaml", "rollout/skips/fuzz.yaml", ".github/CODEOWNERS"}

// maxLoadAlloc bounds what one Load of a small control repo may allocate, whatever the
// input: an alias bomb or a deeply nested document must be refused, not expanded.
const maxLoadAlloc = 256 << 20

// FuzzControlDecode loads the valid control repo with one file replaced by the input.
// Invariants: no panic; allocation bounded; an alias bomb is ErrTooLarge naming the file;
// every issue names a file of the repo (never an empty position), and a failure that is not
// a list of issues names the fuzzed file; a repo that loads has a platform.
func FuzzControlDecode(f *testing.F) {
	base := fstest.MapFS{}
	root := os.DirFS(validDir)
	if err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		base[p] = &fstest.MapFile{Data: b}
		return err
	}); err != nil {
		f.Fatal(err)
	}
	for i, p := range fuzzTargets {
		if d, ok := base[p]; ok {
			f.Add(byte(i), d.Data)
		}
	}
	f.Add(byte(1), []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: fuzz}\nspec:\n  admins: [x]\n  values: {a: \"1\"}\n"))
	f.Add(byte(5), []byte("digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\nrevision: 0123abc\nnote: ok\n"))
	f.Add(byte(6), []byte("digest: sha256:x\n"))
	f.Add(byte(7), []byte("* @acme/platform\n/rollout/approvals/ @acme/release [bot] x@y.z # c\n!x\n**/a/**/b? @u\n"))
	f.Add(byte(0), []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n"+
		"  rollout:\n    windows:\n      - {kind: deny, days: [Mon], start: \"23:59\", duration: 168h, timeZone: Pacific/Chatham}\n"+
		"    waves:\n      - {name: a, clusterSelector: {}, maxUnavailable: 50%, maxFailures: 1, approval: required, onFailure: rollback}\n"))

	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		file := fuzzTargets[int(which)%len(fuzzTargets)]
		m := make(fstest.MapFS, len(base)+1)
		for p, d := range base {
			m[p] = d
		}
		m[file] = &fstest.MapFile{Data: data}

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		repo, err := Load(m)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > maxLoadAlloc {
			t.Fatalf("loading %d bytes in %s allocated %d bytes", len(data), file, n)
		}

		if yamlsize.Check(data, yamlsize.DefaultMaxNodes) != nil && path.Ext(file) == ".yaml" {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("an alias bomb in %s was not refused as too large: %v", file, err)
			}
		}
		if err == nil {
			if repo == nil || repo.Platform == nil {
				t.Fatalf("Load returned no error and no platform")
			}
			return
		}
		if repo != nil {
			t.Fatalf("Load returned a repo with an error: %v", err)
		}
		var issues Issues
		if !errors.As(err, &issues) {
			if !containsFile(err.Error(), file) {
				t.Fatalf("error does not name %s: %v", file, err)
			}
			return
		}
		if len(issues) == 0 {
			t.Fatalf("an empty Issues is not an error")
		}
		for _, is := range issues {
			if is.Pos.File == "" {
				t.Fatalf("issue without a file: %s", is)
			}
			if _, err := fs.Stat(m, is.Pos.File); err != nil {
				t.Fatalf("issue names %q, which is not in the repo: %s", is.Pos.File, is)
			}
		}
	})
}

func containsFile(msg, file string) bool {
	for i := 0; i+len(file) <= len(msg); i++ {
		if msg[i:i+len(file)] == file {
			return true
		}
	}
	return false
}
