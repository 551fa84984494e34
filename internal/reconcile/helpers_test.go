package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// fleet is a hand-built stand-in for a control repo: cluster name -> value.
type fleet map[string]string

func (fl fleet) repo() *control.Repo {
	r := &control.Repo{
		Platform: &control.Platform{
			Metadata: control.Meta{Name: "acme"},
			Spec: control.PlatformSpec{
				Owner: "acme", Admins: []string{"platform"}, DefaultBranch: "main",
				PullRequests: control.PullRequestSpec{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}},
			},
		},
		Revision: "0123456789abcdef0123456789abcdef01234567",
	}
	for _, n := range fl.names() {
		r.Clusters = append(r.Clusters, &control.Cluster{Metadata: control.Meta{Name: n}})
	}
	return r
}

func (fl fleet) names() []string {
	ns := make([]string, 0, len(fl))
	for n := range fl {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// targets renders the fleet the way fanout lays out cluster repos.
func (fl fleet) targets() []*fanout.Target {
	var ts []*fanout.Target
	for _, n := range fl.names() {
		repo := "cluster-" + n
		ts = append(ts, &fanout.Target{
			Kind: fanout.KindCluster, Name: n, Owner: "acme", Repo: repo, DefaultBranch: "main", Visibility: "private",
			Files: map[string][]byte{
				"README.md":          []byte("# " + repo + "\n\nManaged by fleetbot.\n"),
				".github/CODEOWNERS": []byte("* @acme/platform\n/apps/ @acme/" + n + "-admins\n"),
				"flux/fleetbot.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: platform\n  namespace: flux-system\nspec:\n  path: ./platform\n  prune: true\n" +
					"---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n  prune: true\n"),
				"platform/kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- monitoring.yaml\n"),
				"platform/monitoring.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: monitoring\n  namespace: monitoring\ndata:\n  value: \"" + fl[n] + "\"\n" +
					"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: monitoring\n"),
			},
			Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")},
			Access:    policy.ClusterRepoAccess([]string{"platform"}, []string{n + "-admins"}, nil, "main"),
			Reviewers: []string{"platform"},
		})
	}
	return ts
}

func clock() func() time.Time {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { return t0 }
}

func openForge(t *testing.T, dir string) *local.Forge {
	t.Helper()
	f, err := local.Open(dir, local.Options{Now: clock(), LockTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// dirState hashes every file under dir except the lock file: two equal
// states mean nothing was written.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		if rel == local.LockFile {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	require.NoError(t, err)
	return out
}

// allRefs reads every branch of every repo of acme.
func allRefs(t *testing.T, f *local.Forge, repos ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range repos {
		refs, err := f.Refs("acme", r)
		require.NoError(t, err, r)
		for b, sha := range refs {
			out[r+":"+b] = sha
		}
	}
	return out
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
}

// humanPush clones a target repo with plain git, lets edit change the
// checkout, commits as a human and pushes branch.
func humanPush(t *testing.T, forgeDir, repo, branch string, edit func(wt string)) string {
	t.Helper()
	wt := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = wt
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Hu Man", "GIT_AUTHOR_EMAIL=hu@example.com",
			"GIT_COMMITTER_NAME=Hu Man", "GIT_COMMITTER_EMAIL=hu@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+wt)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("clone", "-q", "--branch", branch, filepath.Join(forgeDir, "acme", repo+".git"), ".")
	edit(wt)
	git("add", "-A")
	git("commit", "-q", "-m", "human edit")
	git("push", "-q", "origin", "HEAD:refs/heads/"+branch)
	return git("rev-parse", "HEAD")
}

func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func byRepo(rep *Report) map[string]Result {
	out := map[string]Result{}
	for _, r := range rep.Results {
		out[strings.TrimPrefix(r.Repo, "acme/")] = r
	}
	return out
}

func actions(rep *Report) map[string]string {
	out := map[string]string{}
	for repo, r := range byRepo(rep) {
		s := string(r.Action)
		if r.Err != nil {
			s = "error: " + r.Err.Error()
		}
		out[repo] = s
	}
	return out
}

func apply(t *testing.T, f Forge, fl fleet, opts Options) (*Report, error) {
	t.Helper()
	if opts.Concurrency == 0 {
		opts.Concurrency = 4
	}
	return Apply(context.Background(), f, fl.repo(), fl.targets(), opts)
}

func repoNames(fl fleet, extra ...string) []string {
	var out []string
	for _, n := range fl.names() {
		out = append(out, "cluster-"+n)
	}
	return append(out, extra...)
}

func tenClusters() fleet {
	fl := fleet{}
	for i := 1; i <= 10; i++ {
		fl[fmt.Sprintf("c%02d", i)] = "v1"
	}
	return fl
}

func execGit(dir, repo string, args ...string) *exec.Cmd {
	return exec.Command("git", append([]string{"--git-dir", filepath.Join(dir, "acme", repo+".git")}, args...)...)
}
