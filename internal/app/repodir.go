package app

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// entriesUnder lists the kustomization directories to render: top itself,
// or with perChild each top/<name>/ holding a kustomization.
func entriesUnder(files map[string][]byte, top string, perChild bool) []string {
	seen := map[string]bool{}
	for p := range files {
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		switch name {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			continue
		}
		if (perChild && path.Dir(dir) == top) || (!perChild && dir == top) {
			seen[dir] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// readRepoDir reads a repo checkout into memory (every regular file but
// .git), so kustomize never touches the disk or the network. Symlinks are
// not followed. The control repo's bounds apply (control.MaxFileBytes a
// file, checked before reading, control.MaxFiles, control.MaxTotalBytes):
// a workspace or cluster repo is written by its admins, and check runs in CI
// on their pull requests.
func readRepoDir(dir string) (map[string][]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	files := map[string][]byte{}
	var count int
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		count++
		total += info.Size()
		switch {
		case info.Size() > control.MaxFileBytes:
			return fmt.Errorf("%w: %s: %d bytes, more than the %d a file may have; nothing was checked", control.ErrTooLarge, p, info.Size(), control.MaxFileBytes)
		case count > control.MaxFiles:
			return fmt.Errorf("%w: %s: the repo has more than %d files; nothing was checked", control.ErrTooLarge, p, control.MaxFiles)
		case total > control.MaxTotalBytes:
			return fmt.Errorf("%w: %s: the repo holds more than %d bytes; nothing was checked", control.ErrTooLarge, p, control.MaxTotalBytes)
		}
		f, err := root.Open(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(f, control.MaxFileBytes+1))
		f.Close()
		if err != nil {
			return err
		}
		if len(b) > control.MaxFileBytes {
			return fmt.Errorf("%w: %s grew past %d bytes while read; nothing was checked", control.ErrTooLarge, p, control.MaxFileBytes)
		}
		files[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return files, nil
}

// CheckTargetRepo is check workspace / check cluster on the target repo checkout at dir,
// offline: for a workspace repo (kind fanout.KindWorkspace) it renders every
// clusters/<cluster>/ kustomization, confined to namespace and impersonating the
// ServiceAccount named after workspace; for a cluster repo it renders apps/. It returns the
// kustomizations it rendered, empty when dir has none of that kind's (not a repo of that
// kind), and the problems found.
func CheckTargetRepo(kind fanout.Kind, dir, workspace, namespace string) ([]string, []fanout.RepoProblem, error) {
	files, err := readRepoDir(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, problems := checkTargetFiles(kind, files, workspace, namespace)
	return entries, problems, nil
}

// checkTargetFiles is CheckTargetRepo on the repo's files, by slash-separated path (a
// checkout read by readRepoDir, or a commit read through the GitHub API by serve).
func checkTargetFiles(kind fanout.Kind, files map[string][]byte, workspace, namespace string) ([]string, []fanout.RepoProblem) {
	c := fanout.RepoCheck{Entries: entriesUnder(files, "apps", false)}
	if kind == fanout.KindWorkspace {
		c = fanout.RepoCheck{Entries: entriesUnder(files, "clusters", true), Namespace: namespace, ServiceAccount: workspace}
	}
	if len(c.Entries) == 0 {
		return nil, nil
	}
	return c.Entries, fanout.CheckRepo(files, c)
}
