package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// rollbackSecret signs the fake GitHub's webhooks to the serve of TestRolloutRollsBackOnFailingWorkspace.
const rollbackSecret = "e2e-rollback-secret"

// rollbackPlatform rolls out in two waves (canary: ring=canary, prod: ring=prod), each with no
// failure budget, rolling back on failure, health delivered by generic-hmac to serve at %s.
// The repos are read without a credential (flux.secretRef ""; the fake serves anonymous reads).
const rollbackPlatform = `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata:
  name: acme
spec:
  owner: acme
  admins: [platform]
  flux:
    secretRef: ""
  rollout:
    onFailure: rollback
    health: {provider: generic-hmac, url: "%s"}
    waves:
      - name: canary
        clusterSelector: {matchLabels: {ring: canary}}
        maxUnavailable: 0
      - name: prod
        clusterSelector: {matchLabels: {ring: prod}}
        maxUnavailable: 0
`

// greeterApp is the catalog app both workspaces run; its release value lands in a label.
func greeterApp(release string) string {
	return `apiVersion: fleetbot.io/v1alpha1
kind: App
metadata:
  name: greeter
spec:
  scope: namespaced
  values:
    greeter_release:
      default: "` + release + `"
`
}

// rollbackControl is the control repo of the test: greeter in workspaces shop-a (on cluster c1,
// wave canary) and shop-b (on c2, wave prod), at release.
func rollbackControl(healthURL, release string) map[string]string {
	files := map[string]string{
		"platform.yaml":                      fmt.Sprintf(rollbackPlatform, healthURL),
		"catalog/greeter/app.yaml":           greeterApp(release),
		"catalog/greeter/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- greeter.yaml\n",
		"catalog/greeter/greeter.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: greeter
  labels:
    app.kubernetes.io/version: "${greeter_release}"
data:
  greeting: hello
`,
	}
	for _, c := range []struct{ name, ring, ws string }{{"c1", "canary", "shop-a"}, {"c2", "prod", "shop-b"}} {
		files["clusters/"+c.name+".yaml"] = fmt.Sprintf("apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\n  labels: {ring: %s}\nspec:\n  workspace: %s\n  admins: [%s-sre]\n", c.name, c.ring, c.ws, c.name)
		files["workspaces/"+c.ws+".yaml"] = fmt.Sprintf("apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: %s\nspec:\n  admins: [%s-devs]\n  apps:\n    - app: greeter\n", c.ws, c.ws)
	}
	return files
}

// rollbackRun is the state of TestRolloutRollsBackOnFailingWorkspace: the fake GitHub, serve,
// and the clusters' keys.
type rollbackRun struct {
	t     *testing.T
	e     *environment
	gh    *githubtest.Server
	human *gh.Client
	keys  map[string][]byte
}

// TestRolloutRollsBackOnFailingWorkspace: issue 35's rollback on a real Flux. fleetbot serve
// runs against the fake GitHub with a control repo rolling out in two waves (canary: cluster c1
// with workspace shop-a; prod: c2 with shop-b; onFailure: rollback, no failure budget), health
// delivered by each cluster's real notification-controller to serve's /health over generic-hmac
// (no GitHub credential on any cluster: serve records the verdicts as commit statuses). Each
// cluster is an API server of its own with kube-controller-manager and source-, kustomize- and
// notification-controller under the lockdown, bootstrapped from its cluster repo on the fake.
//
// The first revision rolls out wave by wave and Flux reports it healthy. A control change then
// breaks the workspaces' app (a label value the API server refuses): only the canary's
// workspace repo gets it, Flux on c1 fails the workspace Kustomization, notification-controller
// reports the failure, serve halts the rollout and opens the pull request restoring shop-a's
// last healthy tree; merged (the wave merges by hand: the test merges as the platform admin),
// Flux applies it, the Kustomization is Ready again and reports success, and shop-b never got
// the broken revision. No soak or health timeout is declared, so no time has to pass.
func TestRolloutRollsBackOnFailingWorkspace(t *testing.T) {
	e := env
	ctx := context.Background()
	port, err := freePort()
	require.NoError(t, err)
	serveURL := "http://127.0.0.1:" + strconv.Itoa(port)
	hookFile := filepath.Join(t.TempDir(), "webhook-url")
	require.NoError(t, os.WriteFile(hookFile, []byte(serveURL+"/webhook"), 0o644))
	r := &rollbackRun{t: t, e: e, keys: map[string][]byte{"c1": []byte("the key of cluster c1"), "c2": []byte("the key of cluster c2")},
		gh: githubtest.NewServer(t, githubtest.WithWebhookURLFile(hookFile, rollbackSecret), githubtest.WithAnonymousReads())}
	r.human = r.gh.Client()
	r.gh.CreateOrg(owner)
	for _, team := range []string{"platform", "c1-sre", "c2-sre", "shop-a-devs", "shop-b-devs"} {
		r.gh.CreateTeam(owner, team)
	}
	healthURL := serveURL + "/health"
	r.gh.CreateRepo(owner, "control", rollbackControl(healthURL, "v1"))
	first := r.gh.Branch(owner, "control", "main")
	r.startServe(port)

	// The first revision: the canary's cluster and workspace repos, then, once c1 reports
	// healthy, the prod wave's.
	c1 := r.bringUp("c1", "shop-a", healthURL)
	r.waitOpen("cluster-c2")
	r.waitOpen("workspace-shop-b")
	c2 := r.bringUp("c2", "shop-b", healthURL)
	r.waitRolloutTitle(first, "rollout done: 2 of 2 waves")
	shopBHead := r.gh.Branch(owner, "workspace-shop-b", "main")

	// The breaking change: the workspaces' app gets a label value the API server refuses.
	broken := r.gh.Commit(owner, "control", "main", "greeter: release v2 beta", map[string]string{"catalog/greeter/app.yaml": greeterApp("v2 beta")})
	p := r.waitOpen("workspace-shop-a")
	assert.Contains(t, p.GetBody(), broken, "the pull request carries the broken revision")
	brokenMerge := r.merge("workspace-shop-a", p)
	requestReconcileOn(t, c1.kube, "source.toolkit.fluxcd.io/v1", "GitRepository", "shop-a", "workspace-shop-a")
	msg := waitRefusedOn(t, c1.kube, "shop-a", "workspace-shop-a", brokenMerge, "greeter")
	t.Logf("Flux on c1 refuses the broken revision: %s", msg)

	// notification-controller reports it; serve records the failure on the workspace repo's
	// merge, halts the rollout and opens the restore.
	wsContext := rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: "c1", Namespace: "shop-a"}, "workspace-shop-a")
	r.waitStatus("workspace-shop-a", brokenMerge, wsContext, "failure")
	restore := r.waitOpen("workspace-shop-a")
	assert.Contains(t, restore.GetTitle(), "fleetbot: roll back workspace shop-a to")
	halted := r.waitRolloutRun(broken, func(cr *gh.CheckRun) bool {
		return strings.HasPrefix(cr.GetOutput().GetTitle(), "rollout halted on c1")
	})
	assert.Equal(t, "failure", halted.GetConclusion())
	assert.Contains(t, halted.GetOutput().GetTitle(), "rollout halted on c1: 1 of 1 clusters failed (failed: c1), over maxFailures 0 (first: Flux reported a failure for the merge of workspace-shop-a#"+strconv.Itoa(p.GetNumber())+")")
	summary := halted.GetOutput().GetSummary()
	assert.Contains(t, summary, "**Rolled back** revision `"+broken[:7]+"` because c1: ")
	assert.Contains(t, summary, "| workspace-shop-a | `"+first[:7]+"` | #"+strconv.Itoa(restore.GetNumber())+" | open |")

	// Merged, the restore is applied by Flux, which reports it healthy.
	restored := r.merge("workspace-shop-a", restore)
	requestReconcileOn(t, c1.kube, "source.toolkit.fluxcd.io/v1", "GitRepository", "shop-a", "workspace-shop-a")
	waitAppliedOn(t, c1.kube, "shop-a", "workspace-shop-a", restored)
	r.waitStatus("workspace-shop-a", restored, wsContext, "success")
	cm, err := c1.kube.get(ctx, "v1", "ConfigMap", "shop-a", "greeter")
	require.NoError(t, err)
	assert.Equal(t, "v1", field(cm, "metadata", "labels", "app.kubernetes.io/version"), "c1 runs the last healthy release")
	last := r.waitRolloutRun(broken, func(cr *gh.CheckRun) bool {
		return strings.Contains(cr.GetOutput().GetSummary(), "| workspace-shop-a | `"+first[:7]+"` | #"+strconv.Itoa(restore.GetNumber())+" | healthy |")
	})
	assert.Contains(t, last.GetOutput().GetSummary(), "**Rolled back** revision `"+broken[:7]+"`")

	// The prod wave never got the broken revision: no pull request, the same head, v1 on c2.
	for _, repo := range []string{"workspace-shop-b", "cluster-c2"} {
		for _, pull := range r.gh.Pulls(owner, repo) {
			assert.NotContains(t, pull.GetBody(), broken, "%s#%d carries the broken revision", repo, pull.GetNumber())
		}
	}
	assert.Equal(t, shopBHead, r.gh.Branch(owner, "workspace-shop-b", "main"))
	cm, err = c2.kube.get(ctx, "v1", "ConfigMap", "shop-b", "greeter")
	require.NoError(t, err)
	assert.Equal(t, "v1", field(cm, "metadata", "labels", "app.kubernetes.io/version"))
	t.Logf("revision %.7s failed on c1's workspace shop-a (#%d), rolled back by #%d to %.7s, healthy again; shop-b stayed at %.7s",
		broken, p.GetNumber(), restore.GetNumber(), first, shopBHead)
}

// startServe runs fleetbot serve on port against the fake GitHub, with the clusters' health keys.
func (r *rollbackRun) startServe(port int) {
	t := r.t
	keys := filepath.Join(t.TempDir(), "health-keys")
	require.NoError(t, os.MkdirAll(keys, 0o700))
	for c, k := range r.keys {
		require.NoError(t, os.WriteFile(filepath.Join(keys, c), k, 0o600))
	}
	proc, err := r.e.spawn("serve-rollback", r.e.fleetbot, []string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--health-keys", keys, "--github-cache", filepath.Join(t.TempDir(), "cache"),
		"--content-per-minute", "100000", "--content-per-hour", "1000000", "--mutation-interval", "0"}, []string{
		"FLEETBOT_CONTROL_REPO=" + owner + "/control", fmt.Sprintf("FLEETBOT_APP_ID=%d", r.gh.AppID()),
		"FLEETBOT_APP_KEY=" + string(r.gh.AppPrivateKeyPEM()), "FLEETBOT_WEBHOOK_SECRET=" + rollbackSecret,
		"GITHUB_API_URL=" + r.gh.APIURL(), "FLEETBOT_LOG_LEVEL=info"})
	require.NoError(t, err)
	t.Cleanup(func() { stopProcesses(proc) })
	require.NoError(t, poll(context.Background(), time.Minute, "fleetbot serve ready", func() (bool, string, error) {
		if err := proc.exited(); err != nil {
			return false, "", err
		}
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	}))
}

// bringUp makes cluster (its workspace ws) what its wave needs: its open pull requests merged
// by the platform admin, its own API server with Flux bootstrapped from its repo, the health
// Secrets in place, and Flux's healthy reports recorded by serve on both repos.
func (r *rollbackRun) bringUp(cluster, ws, healthURL string) *fluxCluster {
	t := r.t
	ctx := context.Background()
	repo := "cluster-" + cluster
	wsRepo := "workspace-" + ws
	merged := r.merge(repo, r.waitOpen(repo))
	wsMerged := r.merge(wsRepo, r.waitOpen(wsRepo))

	c := r.e.startFluxCluster(t, "rb-"+cluster, clusterFlux{notification: true, lockdown: true})
	cm, err := r.e.startControllerManagerOn("kube-controller-manager-rb-"+cluster, c.kubeconfig, c.pki, c.kube)
	if cm != nil {
		t.Cleanup(func() { stopProcesses(cm) })
	}
	require.NoError(t, err, "kube-controller-manager of %s: the workspace's ServiceAccount is bound to the aggregated admin ClusterRole", cluster)

	// What the platform admins provide: the health keys, the cluster's in flux-system and the
	// one derived for the workspace namespace there.
	key := r.keys[cluster]
	require.NoError(t, c.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: v1
kind: Namespace
metadata:
  name: %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: flux-system
stringData:
  token: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: %[2]s
stringData:
  token: %[3]s
`, key, ws, rollout.NamespaceKey(key, ws))), ""))
	// notification-controller drops for good an event no Alert in its cache matches, and the
	// bootstrap's first events would race the Alerts it creates: the Providers and Alerts of
	// the cluster repo go first (Flux adopts them), each probed until serve records its event.
	fleetbotYAML := r.gh.Files(owner, repo, merged)["flux/fleetbot.yaml"]
	require.Contains(t, fleetbotYAML, "address: "+healthURL+"/"+cluster+"/"+ws, "the workspace's Provider posts to serve")
	objs, err := splitYAML([]byte(fleetbotYAML))
	require.NoError(t, err)
	for _, obj := range objs {
		if kind, _ := obj["kind"].(string); kind == "Provider" || kind == "Alert" {
			require.NoError(t, c.kube.apply(ctx, obj, nil))
		}
	}
	r.waitAlertServes(c, repo, "flux-system", cluster, "")
	r.waitAlertServes(c, wsRepo, ws, cluster, ws)

	boot := r.gh.Commit(owner, repo, "main", "Add Flux sync manifests",
		r.e.fluxBootstrapFiles(t, r.gh.URL+"/"+owner+"/"+repo+".git", "", false))
	applyFluxSystem(t, c.kube, mapFS(r.gh.Files(owner, repo, boot)))
	waitAppliedOn(t, c.kube, "flux-system", "flux-system", boot)
	waitAppliedOn(t, c.kube, ws, wsRepo, wsMerged)
	r.waitStatus(repo, boot, rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: cluster}, "flux-system"), "success")
	r.waitStatus(wsRepo, wsMerged, rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: cluster, Namespace: ws}, wsRepo), "success")
	return c
}

// waitAlertServes posts a probe event of a Kustomization in namespace to the cluster's
// notification-controller, with a revision naming a commit of repo on a branch nothing deploys,
// again until serve has recorded its status there (the Alert and Provider serve).
func (r *rollbackRun) waitAlertServes(c *fluxCluster, repo, namespace, cluster, ws string) {
	t := r.t
	sha := r.gh.Commit(owner, repo, "fleetbot-e2e-probe", "Alert probe", map[string]string{"probe.txt": "a commit no Flux applies\n"})
	want := rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: cluster, Namespace: ws}, "fleetbot-e2e-probe")
	n := 0
	err := poll(t.Context(), fluxDeadline, fmt.Sprintf("serve recording %s's probe of namespace %s on %s@%.12s", cluster, namespace, repo, sha), func() (bool, string, error) {
		n++
		body, err := json.Marshal(map[string]any{
			"involvedObject":      map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "namespace": namespace, "name": "fleetbot-e2e-probe"},
			"severity":            "info",
			"timestamp":           time.Now().UTC().Format(time.RFC3339),
			"message":             fmt.Sprintf("alert probe %d", n),
			"reason":              "Progressing",
			"metadata":            map[string]string{"kustomize.toolkit.fluxcd.io/revision": "fleetbot-e2e-probe@sha1:" + sha},
			"reportingController": "kustomize-controller",
		})
		if err != nil {
			return false, "", err
		}
		resp, err := http.Post(c.events, "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		got := r.statuses(repo, sha)
		return got[want] != "", fmt.Sprintf("probe %d answered %s; statuses %v", n, resp.Status, got), nil
	})
	require.NoError(t, err)
}

// statuses are the newest state of each commit status context of repo at sha.
func (r *rollbackRun) statuses(repo, sha string) map[string]string {
	list, _, err := r.human.Repositories.ListStatuses(context.Background(), owner, repo, sha, &gh.ListOptions{PerPage: 100})
	out := map[string]string{}
	if err != nil {
		out["error"] = err.Error()
		return out
	}
	for _, s := range list { // newest first, as GitHub lists them
		if _, ok := out[s.GetContext()]; !ok {
			out[s.GetContext()] = s.GetState()
		}
	}
	return out
}

// waitStatus waits until the newest status context of repo at sha is state.
func (r *rollbackRun) waitStatus(repo, sha, context, state string) {
	r.t.Helper()
	require.NoError(r.t, poll(r.t.Context(), fluxDeadline, fmt.Sprintf("%s=%s on %s@%.12s", context, state, repo, sha), func() (bool, string, error) {
		got := r.statuses(repo, sha)
		return got[context] == state, fmt.Sprint(got), nil
	}))
}

// waitOpen waits for fleetbot's open pull request in repo and returns it.
func (r *rollbackRun) waitOpen(repo string) *gh.PullRequest {
	r.t.Helper()
	var open *gh.PullRequest
	require.NoError(r.t, poll(r.t.Context(), fluxDeadline, "an open pull request in "+repo, func() (bool, string, error) {
		for _, p := range r.gh.Pulls(owner, repo) {
			if p.GetState() == "open" {
				open = p
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d pull requests, none open", len(r.gh.Pulls(owner, repo))), nil
	}))
	return open
}

// merge merges p in repo as the platform admin and returns the merge commit.
func (r *rollbackRun) merge(repo string, p *gh.PullRequest) string {
	r.t.Helper()
	res, _, err := r.human.PullRequests.Merge(context.Background(), owner, repo, p.GetNumber(), "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(r.t, err, "merging %s#%d", repo, p.GetNumber())
	return res.GetSHA()
}

// waitRolloutRun waits until a rollout check run on the control commit sha satisfies ok, and
// returns it (every run of the commit is looked at: a changed verdict gets a new one).
func (r *rollbackRun) waitRolloutRun(sha string, ok func(*gh.CheckRun) bool) *gh.CheckRun {
	r.t.Helper()
	var found *gh.CheckRun
	name := "fleetbot rollout"
	all := "all"
	require.NoError(r.t, poll(r.t.Context(), fluxDeadline, "a rollout check run on control@"+sha[:12], func() (bool, string, error) {
		runs, _, err := r.human.Checks.ListCheckRunsForRef(context.Background(), owner, "control", sha, &gh.ListCheckRunsOptions{CheckName: &name, Filter: &all})
		if err != nil {
			return false, err.Error(), nil
		}
		var titles []string
		for _, cr := range runs.CheckRuns {
			if ok(cr) {
				found = cr
				return true, "", nil
			}
			titles = append(titles, cr.GetOutput().GetTitle())
		}
		return false, fmt.Sprintf("titles %q", titles), nil
	}))
	return found
}

// waitRolloutTitle waits for a rollout check run on sha titled title.
func (r *rollbackRun) waitRolloutTitle(sha, title string) *gh.CheckRun {
	r.t.Helper()
	return r.waitRolloutRun(sha, func(cr *gh.CheckRun) bool { return cr.GetOutput().GetTitle() == title })
}
