package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Deadlines for what the cluster does; generous, since the machine is
// shared, and never waited out when things go well (every wait polls).
const (
	fluxDeadline = 3 * time.Minute
	owner        = "acme"
)

// fleetbot runs the fleetbot binary built from this tree and returns its
// exit code, stdout and stderr.
func (e *environment) fleetbotRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(e.fleetbot, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = e.dir
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running fleetbot %v: %v", args, err)
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// apply runs fleetbot apply of the test's control repo into the forge,
// with the Git URL of the served forge, and requires success.
func (e *environment) apply(t *testing.T, flags ...string) string {
	t.Helper()
	code, out, errOut := e.fleetbotRun(t, append([]string{"apply", "--control", e.control, "--forge", "local:" + e.forge, "--git-url", e.gitURL}, flags...)...)
	require.Equal(t, 0, code, "fleetbot apply:\n%s\n%s", out, errOut)
	return out
}

// git runs git in dir (or with --git-dir) and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	// GIT_CONFIG_GLOBAL=/dev/null: the user's ~/.gitconfig (commit.gpgsign, hooks, ...) must not
	// change what the test commits or make git wait on a pinentry.
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@fleetbot.invalid", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@fleetbot.invalid")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v in %s:\n%s", args, dir, out)
	return strings.TrimSpace(string(out))
}

// bare is the forge's bare repository of repo.
func (e *environment) bare(repo string) string { return filepath.Join(e.forge, owner, repo+".git") }

// merge merges fleetbot's pull request of repo by hand, fast-forwarding the
// default branch to the bot branch (the forge recognises it as merged on
// the next apply), and returns the new head.
func (e *environment) merge(t *testing.T, repo string) string {
	t.Helper()
	bare := e.bare(repo)
	git(t, bare, "merge-base", "--is-ancestor", "refs/heads/main", "refs/heads/fleetbot/sync")
	head := git(t, bare, "rev-parse", "refs/heads/fleetbot/sync")
	git(t, bare, "update-ref", "refs/heads/main", head)
	return head
}

// clone checks repo's main out into a fresh directory.
func (e *environment) clone(t *testing.T, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), repo)
	git(t, e.dir, "clone", "-q", e.bare(repo), dir)
	return dir
}

// push commits everything in the clone dir and pushes it to main, as a
// person merging a pull request would; it returns the new head.
func push(t *testing.T, dir, message string) string {
	t.Helper()
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", message)
	git(t, dir, "push", "-q", "origin", "HEAD:main")
	return git(t, dir, "rev-parse", "HEAD")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// commitControl commits the test's control repo, so apply names a commit.
func (e *environment) commitControl(t *testing.T, message string) {
	t.Helper()
	git(t, e.control, "add", "-A")
	git(t, e.control, "commit", "-q", "--allow-empty", "-m", message)
}

// requestReconcile asks source-controller to fetch a GitRepository now, as
// flux reconcile source git does, instead of waiting for its interval.
func (e *environment) requestReconcile(t *testing.T, namespace, name string) {
	t.Helper()
	requestReconcileOn(t, e.kube, "source.toolkit.fluxcd.io/v1", "GitRepository", namespace, name)
}

// requestReconcileOn asks the controller of a Flux object on kube to
// reconcile it now (the reconcile.fluxcd.io/requestedAt annotation, as flux
// reconcile sets it), instead of waiting for its interval or retry.
func requestReconcileOn(t *testing.T, kube *kubeClient, apiVersion, kind, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	p, err := kube.objectPath(ctx, apiVersion, kind, namespace, name)
	require.NoError(t, err)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano))
	code, body, err := kube.raw(ctx, "PATCH", p, []byte(patch), "application/merge-patch+json", nil)
	require.NoError(t, err)
	require.Equal(t, 200, code, "requesting reconcile of %s %s/%s: %s", kind, namespace, name, body)
}

// waitApplied waits until the Kustomization is Ready with the commit sha
// applied.
func (e *environment) waitApplied(t *testing.T, namespace, name, sha string) {
	t.Helper()
	waitAppliedOn(t, e.kube, namespace, name, sha)
}

// waitAppliedOn is waitApplied on the API server of kube.
func waitAppliedOn(t *testing.T, kube *kubeClient, namespace, name, sha string) {
	t.Helper()
	err := poll(context.Background(), fluxDeadline, fmt.Sprintf("Kustomization %s/%s Ready at %.12s", namespace, name, sha), func() (bool, string, error) {
		obj, err := kube.get(context.Background(), "kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, name)
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		applied, _ := field(obj, "status", "lastAppliedRevision").(string)
		return st == "True" && strings.HasSuffix(applied, sha), fmt.Sprintf("Ready=%s %s: %s (applied %s)", st, reason, msg, applied), nil
	})
	require.NoError(t, err)
}

// waitRefused waits until the Kustomization tried commit sha and failed
// with a message containing every one of want; it returns the message.
func (e *environment) waitRefused(t *testing.T, namespace, name, sha string, want ...string) string {
	t.Helper()
	return waitRefusedOn(t, e.kube, namespace, name, sha, want...)
}

// waitRefusedOn is waitRefused on the API server of kube.
func waitRefusedOn(t *testing.T, kube *kubeClient, namespace, name, sha string, want ...string) string {
	t.Helper()
	var message string
	err := poll(context.Background(), fluxDeadline, fmt.Sprintf("Kustomization %s/%s refusing %.12s", namespace, name, sha), func() (bool, string, error) {
		obj, err := kube.get(context.Background(), "kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, name)
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		attempted, _ := field(obj, "status", "lastAttemptedRevision").(string)
		message = msg
		ok := st == "False" && strings.HasSuffix(attempted, sha)
		for _, w := range want {
			ok = ok && strings.Contains(msg, w)
		}
		return ok, fmt.Sprintf("Ready=%s %s: %s (attempted %s)", st, reason, msg, attempted), nil
	})
	require.NoError(t, err)
	return message
}

// waitObject waits until get(apiVersion, kind, ns, name) satisfies ok
// (nil object: absent).
func (e *environment) waitObject(t *testing.T, apiVersion, kind, namespace, name string, what string, ok func(map[string]any) bool) {
	t.Helper()
	waitObjectOn(t, e.kube, apiVersion, kind, namespace, name, what, ok)
}

// waitObjectOn is waitObject on the API server of kube.
func waitObjectOn(t *testing.T, kube *kubeClient, apiVersion, kind, namespace, name string, what string, ok func(map[string]any) bool) {
	t.Helper()
	err := poll(context.Background(), fluxDeadline, fmt.Sprintf("%s %s/%s %s", kind, namespace, name, what), func() (bool, string, error) {
		obj, err := kube.get(context.Background(), apiVersion, kind, namespace, name)
		if err != nil {
			return false, err.Error(), nil
		}
		state := "absent"
		if obj != nil {
			b, _ := json.Marshal(obj["spec"])
			state = string(b)
			if len(state) > 400 {
				state = state[:400]
			}
		}
		return ok(obj), state, nil
	})
	require.NoError(t, err)
}

func exists(obj map[string]any) bool { return obj != nil }
func absent(obj map[string]any) bool { return obj == nil }

// bootstrapFlux does what flux bootstrap git --path=flux does to a cluster
// repo and a cluster, with the controllers already running out of cluster:
// it commits flux/flux-system/gotk-components.yaml and gotk-sync.yaml
// (keeping the kustomization.yaml fleetbot scaffolded, with its lockdown
// patches), then applies kustomize build flux/flux-system. It returns the
// commit.
func (e *environment) bootstrapFlux(t *testing.T, repo string) string {
	t.Helper()
	dir := e.clone(t, repo)
	kust := filepath.Join(dir, "flux", "flux-system", "kustomization.yaml")
	_, err := os.Stat(kust)
	require.NoError(t, err, "fleetbot scaffolds flux/flux-system/kustomization.yaml; flux bootstrap keeps it")
	for name, content := range e.fluxBootstrapFiles(t, e.gitURL+"/"+owner+"/"+repo+".git", "", false) {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	sha := push(t, dir, "Add Flux sync manifests")
	applyFluxSystem(t, e.kube, os.DirFS(dir))
	return sha
}

// fluxBootstrapFiles are the files flux bootstrap git --path=flux commits
// into the repo at url: flux/flux-system/gotk-components.yaml (see
// gotkComponents), gotk-sync.yaml (GitRepository flux-system on main,
// reading with the Secret secretRef unless it is "", and Kustomization
// flux-system on ./flux) and, with kustomization, the kustomization.yaml
// listing both that flux bootstrap writes into a repo that has none.
func (e *environment) fluxBootstrapFiles(t *testing.T, url, secretRef string, kustomization bool) map[string]string {
	t.Helper()
	secret := ""
	if secretRef != "" {
		secret = "\n  secretRef:\n    name: " + secretRef
	}
	files := map[string]string{
		"flux/flux-system/gotk-components.yaml": e.gotkComponents(t),
		"flux/flux-system/gotk-sync.yaml": fmt.Sprintf(`# Flux sync manifests, as flux bootstrap writes them
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main%s
  url: %s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./flux
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`, secret, url),
	}
	if kustomization {
		files["flux/flux-system/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-components.yaml\n- gotk-sync.yaml\n"
	}
	return files
}

// applyFluxSystem applies kustomize build flux/flux-system of the repo
// tree repo to kube, as flux bootstrap does once; Flux keeps it from then on.
func applyFluxSystem(t *testing.T, kube *kubeClient, repo fs.FS) {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(repo, "flux/flux-system", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(repo, p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, data)
	})
	require.NoError(t, err, "reading flux/flux-system")
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(mem, "/flux/flux-system")
	require.NoError(t, err, "kustomize build flux/flux-system")
	data, err := res.AsYaml()
	require.NoError(t, err)
	require.NoError(t, kube.applyYAML(context.Background(), data, ""), "applying flux/flux-system")
}

// gotkComponents stands in for the gotk-components.yaml flux bootstrap
// writes: the flux-system namespace, the controllers' ServiceAccounts,
// cluster-admin for the reconcilers (kustomize-controller, helm-controller),
// the CRDs, and the controllers' Deployments with no replicas (the
// controllers run out of cluster; the Deployments carry the flags the
// lockdown patches add, which the test reads back).
func (e *environment) gotkComponents(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`# Stand-in for Flux's gotk-components.yaml (the controllers run out of cluster)
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
  labels:
    app.kubernetes.io/instance: flux-system
    pod-security.kubernetes.io/warn: restricted
`)
	controllers := []string{"source-controller", "kustomize-controller", "helm-controller", "notification-controller"}
	for _, c := range controllers {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s
  namespace: flux-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: flux-system
spec:
  replicas: 0
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      serviceAccountName: %[1]s
      containers:
      - name: manager
        image: ghcr.io/fluxcd/%[1]s:e2e
        args:
        - --watch-all-namespaces=true
`, c)
	}
	// Flux's aggregated roles: they give the admin ClusterRole (bound to
	// each workspace's ServiceAccount) rights on Flux objects.
	b.WriteString(`---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flux-edit-flux-system
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
rules:
- apiGroups: [notification.toolkit.fluxcd.io, source.toolkit.fluxcd.io, helm.toolkit.fluxcd.io, image.toolkit.fluxcd.io, kustomize.toolkit.fluxcd.io]
  resources: ["*"]
  verbs: [create, delete, deletecollection, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flux-view-flux-system
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: [notification.toolkit.fluxcd.io, source.toolkit.fluxcd.io, helm.toolkit.fluxcd.io, image.toolkit.fluxcd.io, kustomize.toolkit.fluxcd.io]
  resources: ["*"]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cluster-reconciler-flux-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: ServiceAccount
  name: kustomize-controller
  namespace: flux-system
- kind: ServiceAccount
  name: helm-controller
  namespace: flux-system
`)
	files, err := filepath.Glob(filepath.Join(e.tools, "crds", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(bytes.TrimPrefix(data, []byte("---\n")))
	}
	return b.String()
}
