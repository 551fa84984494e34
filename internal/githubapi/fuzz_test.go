package githubapi

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
)

// FuzzTenantTree gives tenantBlobs a tree of any entries, one a line, "mode type size path"
// (what a hostile repo's Git Data API answer could hold), and checks what a tenant check would
// read. Invariants: no panic; every entry it picks is a regular file (mode 100644 or 100755,
// type blob) whose path is a plain path inside the repo (fs.ValidPath, no backslash, no .git
// element in any case); the files it picks stay within MaxTenantFiles and MaxTenantBytes; a
// refusal wraps ErrTenantRepo.
func FuzzTenantTree(f *testing.F) {
	for _, s := range []string{
		"100644 blob 12 apps/kustomization.yaml\n100755 blob 3 bin/run.sh\n040000 tree 0 apps",
		"100644 blob 1 ../escape.yaml",
		"100644 blob 1 apps/../../x",
		"120000 blob 11 apps/link.yaml\n160000 commit 0 vendor/lib",
		"100644 blob 1 .GIT/config",
		"100644 blob 99999999 big.bin",
		"100644 blob -5 negative",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tree string) {
		var entries []*gh.TreeEntry
		for _, line := range strings.Split(tree, "\n") {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) != 4 {
				continue
			}
			size, _ := strconv.Atoi(parts[2])
			entries = append(entries, &gh.TreeEntry{Mode: gh.String(parts[0]), Type: gh.String(parts[1]), Size: gh.Int(size), Path: gh.String(parts[3])})
		}
		got, err := tenantBlobs("acme/w", "abc", entries)
		if err != nil {
			if got != nil {
				t.Fatalf("refused with %d entries picked", len(got))
			}
			if !strings.Contains(err.Error(), ErrTenantRepo.Error()) {
				t.Fatalf("refusal without ErrTenantRepo: %v", err)
			}
			return
		}
		if len(got) > MaxTenantFiles {
			t.Fatalf("%d files picked", len(got))
		}
		total := 0
		for _, e := range got {
			p := e.GetPath()
			if e.GetType() != "blob" || (e.GetMode() != "100644" && e.GetMode() != "100755") {
				t.Fatalf("picked %s %s %q", e.GetMode(), e.GetType(), p)
			}
			if !fs.ValidPath(p) || p == "." || strings.Contains(p, "\\") {
				t.Fatalf("picked path %q", p)
			}
			for _, elem := range strings.Split(p, "/") {
				if strings.EqualFold(elem, ".git") {
					t.Fatalf("picked path %q inside .git", p)
				}
			}
			if e.GetSize() < 0 {
				t.Fatalf("picked %q of %d bytes", p, e.GetSize())
			}
			total += e.GetSize()
		}
		if total > MaxTenantBytes {
			t.Fatalf("%d bytes picked", total)
		}
	})
}
