package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/bench"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

const replicaSecret = "e2e-replicas-secret"

// replicaStuckCheck is the replicas' --stuck-check: a control pull request's check run left
// in_progress by a killed replica is run again by a resync after this long (the default, 30
// minutes, is for a real fleet's plans, not for a one-minute run).
const replicaStuckCheck = 20 * time.Second

// streamFor is how long the stream of events and kills runs.
const streamFor = 60 * time.Second

// edge1 is the control repo's cluster edge-1 with its MetalLB range.
func edge1(cidr string) map[string]string {
	return map[string]string{"clusters/edge-1.yaml": `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: edge-1
  labels: {env: prod, network: metal}
spec:
  values:
    metallb_range: ` + cidr + `
    metallb_speaker_tolerations: "true"
`}
}

// serveReplica is one fleetbot serve process of the replica set.
type serveReplica struct {
	id      string
	proc    *process
	url     string // http://127.0.0.1:PORT
	started time.Time
	killed  time.Time // zero while it lives
}

// replicaFleet is the fake GitHub of TestReplicasSurviveKills with the example control repo.
func replicaFleet(t *testing.T) *githubtest.Server {
	t.Helper()
	gh := githubtest.NewServer(t)
	gh.CreateOrg("acme")
	src := filepath.Join("..", "testdata", "control")
	repo, err := control.LoadDir(src)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	teams := map[string]bool{}
	for _, tg := range targets {
		for slug := range tg.Access.Teams {
			if !teams[slug] {
				teams[slug] = true
				gh.CreateTeam("acme", slug)
			}
		}
	}
	files := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS(src), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(src, p))
		files[p] = string(b)
		return err
	}))
	gh.CreateRepo("acme", "control", files)
	return gh
}

// startServeReplica starts fleetbot serve as replica id on the Leases of namespace.
func (e *environment) startServeReplica(t *testing.T, gh *githubtest.Server, namespace, id string) *serveReplica {
	t.Helper()
	listen := e.path("replicas", id+".addr")
	require.NoError(t, os.MkdirAll(filepath.Dir(listen), 0o755))
	p, err := e.spawn("serve-"+id, e.fleetbot, []string{"serve", "--listen", "127.0.0.1:0", "--listen-file", listen,
		"--github-cache", e.path("replicas", id+"-cache"), "--content-per-minute", "100000", "--content-per-hour", "1000000",
		"--mutation-interval", "0", "--resync-interval", "1m", "--stuck-check", replicaStuckCheck.String()}, []string{
		"FLEETBOT_CONTROL_REPO=acme/control", fmt.Sprintf("FLEETBOT_APP_ID=%d", gh.AppID()), "FLEETBOT_APP_KEY=" + string(gh.AppPrivateKeyPEM()),
		"FLEETBOT_WEBHOOK_SECRET=" + replicaSecret, "GITHUB_API_URL=" + gh.APIURL(), "FLEETBOT_REPLICAS_FROM_LEASES=" + namespace,
		"POD_NAME=" + id, "POD_IP=127.0.0.1", "KUBECONFIG=" + e.kubeconfig, "FLEETBOT_LOG_LEVEL=info"})
	require.NoError(t, err)
	r := &serveReplica{id: id, proc: p, started: time.Now()}
	require.NoError(t, poll(context.Background(), time.Minute, id+" listening", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		b, err := os.ReadFile(listen)
		if err != nil {
			return false, "no address yet", nil
		}
		r.url = "http://" + strings.TrimSpace(string(b))
		return true, "", nil
	}))
	return r
}

// logRecord is one JSON log line of a replica.
type logRecord struct {
	Time   time.Time `json:"time"`
	Msg    string    `json:"msg"`
	IDs    string    `json:"ids"`
	Leader string    `json:"leader"`
	Joined bool      `json:"joined"`
}

func readRecords(t *testing.T, path string) []logRecord {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []logRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r logRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Msg != "" {
			out = append(out, r)
		}
	}
	return out
}

// kill is one SIGKILL of the run.
type kill struct {
	id     string
	at     time.Time
	leader bool
}

// TestReplicasSurviveKills runs three fleetbot serve replicas on the real API server's Leases
// against the fake GitHub, with a stream of control pushes, control pull request updates
// (opened, and new head commits: synchronize) and drifts delivered to any live replica, while a
// replica (the leader included) is killed with SIGKILL every few seconds and replaced.
// Afterwards every target repo is converged to the last control commit (fleetbot plan finds
// nothing to do), every open control pull request's head has a completed fleetbot check run
// (re-derived by resync when its delivery or its job died with a replica), no repo has two
// pull requests, no bot branch was moved without naming the head it replaced; every kill's
// takeover time (the last survivor dropping the dead replica from its view, and for the leader
// another leader) is logged, not asserted: it is wall-clock time on a shared machine. With
// FLEETBOT_E2E_REPLICAS_JSON set, the figures are written there (bench.Replicas: make bench
// reports them in docs/benchmarks.md).
func TestReplicasSurviveKills(t *testing.T) {
	e := env
	gh := replicaFleet(t)
	ns := fmt.Sprintf("fleetbot-replicas-%d", time.Now().UnixNano()%100000)
	require.NoError(t, e.kube.applyYAML(context.Background(), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), ""))

	gen := 0
	newID := func() string { gen++; return fmt.Sprintf("fleetbot-%d", gen) }
	var live []*serveReplica
	var all []*serveReplica
	for range 3 {
		r := e.startServeReplica(t, gh, ns, newID())
		live, all = append(live, r), append(all, r)
	}
	defer func() {
		for _, r := range live {
			_ = r.proc.cmd.Process.Signal(syscall.SIGTERM)
		}
	}()

	rng := rand.New(rand.NewPCG(33, 4))
	ctx := context.Background()
	api := gh.Client()
	pushes, drifts, prUpdates := 0, 0, 0
	controlPRs := map[string]int{} // branch -> its open pull request
	var kills []kill
	push := func(r *serveReplica) {
		before := gh.Branch("acme", "control", "main")
		pushes++
		gh.Commit("acme", "control", "main", fmt.Sprintf("push %d", pushes), edge1(fmt.Sprintf("10.9.%d.0/28", pushes%250)))
		ev, err := gh.PushEvent("acme", "control", "main", before)
		require.NoError(t, err)
		_ = gh.Deliver(ctx, r.url+"/webhook", replicaSecret, "push", humanSender(t, ev))
	}
	// A control pull request update: one of three branches is opened as a pull request, or
	// its pull request gets a new head commit (synchronize); the check of every head is the
	// leader's job, whoever is killed when.
	updatePR := func(r *serveReplica) {
		branch := fmt.Sprintf("change-%d", 1+rng.IntN(3))
		prUpdates++
		files := edge1(fmt.Sprintf("10.8.%d.0/28", prUpdates%250))
		number, open := controlPRs[branch]
		action := "synchronize"
		if !open {
			_, _, err := api.Git.CreateRef(ctx, "acme", "control", &github.Reference{Ref: github.String("refs/heads/" + branch),
				Object: &github.GitObject{SHA: github.String(gh.Branch("acme", "control", "main"))}})
			require.NoError(t, err)
			gh.Commit("acme", "control", branch, fmt.Sprintf("%s: update %d", branch, prUpdates), files)
			p, _, err := api.PullRequests.Create(ctx, "acme", "control", &github.NewPullRequest{Title: github.String(branch),
				Head: github.String(branch), Base: github.String("main")})
			require.NoError(t, err)
			number, action = p.GetNumber(), "opened"
			controlPRs[branch] = number
		} else {
			gh.Commit("acme", "control", branch, fmt.Sprintf("%s: update %d", branch, prUpdates), files)
		}
		ev, err := gh.PullRequestEvent("acme", "control", number, action)
		require.NoError(t, err)
		_ = gh.Deliver(ctx, r.url+"/webhook", replicaSecret, "pull_request", ev)
	}
	drift := func(r *serveReplica) {
		repo := "cluster-edge-1"
		if gh.Repo("acme", repo) == nil {
			return
		}
		before := gh.Branch("acme", repo, "main")
		drifts++
		gh.Commit("acme", repo, "main", fmt.Sprintf("drift %d", drifts), map[string]string{"platform/drift.yaml": fmt.Sprintf("# drift %d\n", drifts)})
		ev, err := gh.PushEvent("acme", repo, "main", before)
		require.NoError(t, err)
		_ = gh.Deliver(ctx, r.url+"/webhook", replicaSecret, "push", humanSender(t, ev))
	}
	stream := func() {
		r := live[rng.IntN(len(live))]
		switch rng.IntN(3) {
		case 0:
			push(r)
		case 1:
			updatePR(r)
		default:
			drift(r)
		}
	}

	leaderOf := func() string {
		obj, err := e.kube.get(ctx, "coordination.k8s.io/v1", "Lease", ns, "fleetbot-leader")
		if err != nil {
			return ""
		}
		spec, _ := obj["spec"].(map[string]any)
		h, _ := spec["holderIdentity"].(string)
		return h
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; time.Since(start) < streamFor; i++ {
		<-tick.C
		stream()
		if i%8 != 7 {
			continue
		}
		// Every 4 s a replica dies without a word; every other time, the leader.
		leader := leaderOf()
		victim := rng.IntN(len(live))
		if len(kills)%2 == 1 {
			for j, r := range live {
				if r.id == leader {
					victim = j
				}
			}
		}
		r := live[victim]
		require.NoError(t, r.proc.cmd.Process.Kill())
		r.killed = time.Now()
		kills = append(kills, kill{id: r.id, at: r.killed, leader: r.id == leader})
		live = slices.Delete(live, victim, victim+1)
		n := e.startServeReplica(t, gh, ns, newID())
		live, all = append(live, n), append(all, n)
	}

	// Afterwards: the replicas left converge the fleet (level-triggered: their resyncs and the
	// applies of the last membership change), which plan confirms.
	control := t.TempDir()
	for p, c := range gh.Files("acme", "control", "main") {
		require.NoError(t, os.MkdirAll(filepath.Join(control, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(control, p), []byte(c), 0o644))
	}
	var planOut string
	require.NoError(t, poll(ctx, 3*time.Minute, "fleetbot plan finds the fleet converged", func() (bool, string, error) {
		cmd := []string{"plan", "--control", control, "--forge", "github", "--github-url", gh.APIURL(), "--github-cache", "off", "--detailed-exitcode"}
		code, out, errOut := e.fleetbotRunEnv(t, []string{"GITHUB_TOKEN=" + githubtest.DefaultToken}, cmd...)
		planOut = out + errOut
		return code == 0, fmt.Sprintf("exit %d", code), nil
	}), planOut)

	// Every open control pull request's head has a completed fleetbot check run: a check whose
	// delivery died with a replica, or whose run a kill left in_progress, is re-derived by a
	// resync (Service.RecoverChecks; --stuck-check for the latter).
	lacking := func() []string {
		var out []string
		for _, p := range gh.Pulls("acme", "control") {
			if p.GetState() != "open" {
				continue
			}
			head := p.GetHead().GetSHA()
			runs, _, err := api.Checks.ListCheckRunsForRef(ctx, "acme", "control", head, &github.ListCheckRunsOptions{CheckName: github.String(checkrun.DefaultCheckName)})
			require.NoError(t, err)
			done := slices.ContainsFunc(runs.CheckRuns, func(cr *github.CheckRun) bool { return cr.GetStatus() == "completed" })
			if !done {
				out = append(out, fmt.Sprintf("#%d@%.7s (%d run(s))", p.GetNumber(), head, len(runs.CheckRuns)))
			}
		}
		return out
	}
	recovery := time.Now()
	checksErr := poll(ctx, 3*time.Minute, "a completed fleetbot check on every open control pull request's head", func() (bool, string, error) {
		l := lacking()
		return len(l) == 0, "lacking: " + strings.Join(l, ", "), nil
	})
	assert.NoError(t, checksErr)
	lostChecks := lacking()
	t.Logf("replicas: every control pull request head checked %s after the convergence", time.Since(recovery).Round(100*time.Millisecond))

	pulls, duplicates := 0, 0
	for _, repo := range orgRepos(t, gh) {
		open := 0
		for _, pr := range gh.Pulls("acme", repo) {
			if pr.GetState() == "open" {
				open++
			}
		}
		if repo != "control" {
			assert.LessOrEqual(t, open, 1, "%s: no duplicate pull request", repo)
			duplicates += max(open-1, 0)
		}
		pulls += open
	}
	stale := 0
	for _, m := range gh.RefMoves() {
		if strings.HasSuffix(m.Actor, "[bot]") && m.Guard == githubtest.GuardNone && m.After != "" {
			stale++
			t.Errorf("%s %s moved %s -> %s without naming the head it replaced (%s)", m.Repo, m.Ref, m.Before, m.After, m.Via)
		}
	}

	// Takeover: the time from a kill to the view without the dead replica of the last of the
	// replicas that lived through it (and, for the leader, to another leader in a view).
	var rows []string
	var worst time.Duration
	var shares, leads []time.Duration
	notObserved := 0
	// deadBy: the replica id was killed at or before t.
	deadBy := func(id string, t time.Time) bool {
		for _, r := range all {
			if r.id == id {
				return !r.killed.IsZero() && !r.killed.After(t)
			}
		}
		return false
	}
	for _, k := range kills {
		var took, lead time.Duration
		for _, r := range all {
			if r.id == k.id || !r.started.Before(k.at) || (!r.killed.IsZero() && r.killed.Before(k.at)) {
				continue // not a survivor of this kill
			}
			dropped := false
			for _, rec := range readRecords(t, r.proc.log) {
				if rec.Msg != "replica membership changed" || !rec.Time.After(k.at) || (!r.killed.IsZero() && rec.Time.After(r.killed)) {
					continue
				}
				// Another leader is one alive after the kill: a view still naming a leader killed
				// earlier is stale, not a takeover.
				if d := rec.Time.Sub(k.at); k.leader && rec.Leader != "" && rec.Leader != k.id && !deadBy(rec.Leader, k.at) && (lead == 0 || d < lead) {
					lead = d // the first survivor to see another leader
				}
				if !dropped && rec.Joined && !slices.Contains(strings.Split(rec.IDs, ","), k.id) {
					dropped, took = true, max(took, rec.Time.Sub(k.at))
				}
			}
		}
		worst = max(worst, took, lead)
		if took > 0 {
			shares = append(shares, took)
		} else {
			notObserved++
		}
		if k.leader {
			if lead > 0 {
				leads = append(leads, lead)
			} else {
				notObserved++
			}
		}
		// Takeover times are wall-clock measurements of processes on a shared machine: they are
		// recorded, not asserted (the bound of 15 s is the Leases' own: duration 10 s, renewal
		// every 2 s, unit-tested on an injected clock in internal/membership). What is asserted
		// is that nothing was lost: the plan converges, every control pull request head has a
		// completed check, no duplicate pull request, no stale move.
		row := fmt.Sprintf("%s: share %s", k.id, seen(took))
		if k.leader {
			row += fmt.Sprintf(", lead %s", seen(lead))
		}
		rows = append(rows, row)
	}
	sort.Strings(rows)
	// The checks resyncs re-derived (a head without a completed check: its delivery or its
	// job died with a replica, or a run stuck in_progress).
	recovered, recoveredTenant := 0, 0
	for _, r := range all {
		for _, rec := range readRecords(t, r.proc.log) {
			switch rec.Msg {
			case "control pull request without a completed check; queued":
				recovered++
			case "pull request without a completed tenant check; queued":
				recoveredTenant++ // fleetbot's own pull requests: the fake delivers no webhook of them here
			}
		}
	}
	t.Logf("replicas: %d control pull request checks and %d tenant checks queued by resyncs' recovery", recovered, recoveredTenant)
	t.Logf("replicas: %d kills (%d of the leader), %d control pushes, %d control pull request updates (%d pull requests), %d drifts; takeover per kill: %s; worst %s; open pull requests %d; stale bot-branch moves %d; control pull request heads without a completed check %d; lost work: none (plan converged)",
		len(kills), countLeader(kills), pushes, prUpdates, len(controlPRs), drifts, strings.Join(rows, ", "), worst.Round(100*time.Millisecond), pulls, stale, len(lostChecks))

	if path := os.Getenv(bench.ReplicasEnv); path != "" {
		fig := bench.Replicas{Replicas: 3, Seconds: streamFor.Seconds(), Kills: len(kills), LeaderKills: countLeader(kills),
			ControlPushes: pushes, PRUpdates: prUpdates, Drifts: drifts, Share: bench.SpreadOf(shares), Lead: bench.SpreadOf(leads),
			NotObserved: notObserved, LostChecks: len(lostChecks), Converged: true, OpenControlPRs: len(controlPRs),
			StaleMoves: stale, DuplicatePRs: duplicates, RecoveredChecks: recovered}
		b, err := json.MarshalIndent(fig, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
}

// seen is a takeover time in words: "not observed" when no survivor logged it (a survivor
// killed in turn before it saw the change).
func seen(d time.Duration) string {
	if d == 0 {
		return "not observed"
	}
	return d.Round(100 * time.Millisecond).String()
}

func countLeader(ks []kill) int {
	n := 0
	for _, k := range ks {
		if k.leader {
			n++
		}
	}
	return n
}

// humanSender makes a push event look pushed by a person (fleetbot ignores its own pushes).
func humanSender(t *testing.T, ev any) map[string]any {
	t.Helper()
	b, err := json.Marshal(ev)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	m["sender"] = map[string]any{"login": "alice", "id": 4242, "type": "User"}
	return m
}

// orgRepos lists acme's repos on the fake GitHub.
func orgRepos(t *testing.T, gh *githubtest.Server) []string {
	t.Helper()
	var names []string
	opt := &github.RepositoryListByOrgOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		rs, resp, err := gh.Client().Repositories.ListByOrg(context.Background(), "acme", opt)
		require.NoError(t, err)
		for _, r := range rs {
			names = append(names, r.GetName())
		}
		if resp.NextPage == 0 {
			return names
		}
		opt.Page = resp.NextPage
	}
}

// fleetbotRunEnv is fleetbotRun with extra environment.
func (e *environment) fleetbotRunEnv(t *testing.T, extra []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(e.fleetbot, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), extra...)
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running fleetbot %v: %v", args, err)
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}
