package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/bench"
)

func TestMarkdownMarksTargetsAndExplainsGaps(t *testing.T) {
	r := &results{
		renders: []renderRow{{
			Render:     bench.RenderResult{Clusters: 1000, Apps: 20, Targets: 1020, Files: 23340, Deployments: 16480, Load: 200 * time.Millisecond, Render: 400 * time.Millisecond, Builds: 20},
			RenderProc: childResult{MaxRSS: 80 << 20},
			Naive:      bench.NaiveResult{Clusters: 1000, SampleClusters: 100, Deployments: 16480, SampleDeployments: 1600, Sample: 8 * time.Second},
			Kustomize:  bench.KustomizeResult{Version: "v5.8.2", NaiveResult: bench.NaiveResult{Clusters: 1000, SampleClusters: 5, Deployments: 16480, SampleDeployments: 80, Sample: 4 * time.Second}},
		}},
		github: &bench.GitHubResult{
			Clusters: 1000, Latency: 50 * time.Millisecond, Concurrency: 10,
			Noop: bench.Cost{Repos: 1020, Reads: 12, Requests: 14, Routes: map[string]int{
				"POST /api/graphql": 11, "GET /orgs/{org}/teams": 1, "POST /app/installations/{id}/access_tokens": 1, "GET /orgs/{org}/installation": 1}},
			Incremental: bench.Incremental{Load: 200 * time.Millisecond, Render: 200 * time.Millisecond, Plan: 900 * time.Millisecond, Org: 700 * time.Millisecond, OrgRequests: 12, Changed: 1},
			FanOut:      bench.FanOut{Repos: 1000, Runs: 8, Elapsed: 7*time.Hour + 6*time.Minute, ContentWrites: 4000, Minimum: 7*time.Hour + 6*time.Minute},
			Created:     1020,
			FirstRollout: bench.Cost{Repos: 1020, Changed: 1020, Reads: 40, Writes: 5100, ContentCreating: 2900, ContentRoutes: map[string]int{
				"POST /orgs/{org}/repos": 1020, "POST /{owner}/{repo}/git-receive-pack": 1020, "POST /repos/{owner}/{repo}/pulls": 860}},
			FirstRolloutMinimum: 5*time.Hour + 40*time.Minute,
			OpenPRs: bench.Cost{Repos: 1020, Changed: 1000, Reads: 12, Writes: 2000, ContentCreating: 1000, ContentRoutes: map[string]int{
				"POST /{owner}/{repo}/git-receive-pack": 1000}},
			OpenPRsFanOut: bench.FanOut{Repos: 1000, Runs: 3, Elapsed: 2 * time.Hour, Minimum: time.Hour + 6*time.Minute},
		},
		serve: &bench.ServeResult{Repos: 1020, Rate: 1000, Deliveries: 10000, P50: time.Millisecond, P99: 3 * time.Millisecond, Statuses: map[int]int{202: 10000},
			QueueMax: 10, QueueSize: 1000, Jobs: map[string]int{"apply ok": 3}, SenderNice: -10,
			LoadRequests: map[string]int{"POST /api/graphql": 120, "GET /orgs/{org}/teams": 80, "GET /repos/{owner}/{repo}": 80, "PATCH /repos/{owner}/{repo}/pulls/{number}": 3, "POST /repos/{owner}/{repo}/git/trees": 3, "GET /repos/{owner}/{repo}/git/ref/{ref...}": 80},
			Push:         bench.PushResult{Wall: 150 * time.Millisecond, Touched: []string{"cluster-a"}, TargetWrites: 4, OrgReads: 2, ControlReads: 4}},
		status: &bench.StatusResult{Clusters: 10000, Repos: 10201, Waves: 4, PageSize: 200, Pages: []bench.PageTiming{
			{Name: "first page", Median: 40 * time.Millisecond, Max: 60 * time.Millisecond, Bytes: 300 << 10},
			{Name: "detail", Median: 20 * time.Millisecond, Max: 25 * time.Millisecond, Bytes: 8 << 10}}},
		rollout: &bench.RolloutResult{Clusters: 1000, Latency: 50 * time.Millisecond, Done: true,
			Waves: []bench.RolloutWave{
				{Name: "canary", Clusters: 37, Opened: 37, GateRequests: 10, GateWall: 600 * time.Millisecond, Check: bench.Cost{Requests: 170, Writes: 148, Wall: 2 * time.Second}},
				{Name: "prod", Clusters: 963, Opened: 963, GateRequests: 10, GateWall: 700 * time.Millisecond, Check: bench.Cost{Requests: 3900, Writes: 3852, Wall: 20 * time.Second}},
			},
			Idle: bench.Cost{Requests: 22, Wall: 900 * time.Millisecond}},
	}
	md := string(r.markdown())
	assert.Contains(t, md, "| 7 | Rollout in waves: a change to 1,000 clusters in five waves (canary 37, prod 963)")
	assert.Contains(t, md, "**10 requests** per wave check (GraphQL, 100 repos a query), at most **700 ms** at 50 ms latency per request")
	assert.Contains(t, md, "canary: 170 requests (148 writes) in 2.00 s; prod: 3,900 requests (3,852 writes) in 20.0 s; a check while a wave soaks: 22 requests, 0 writes, 900 ms")
	assert.Contains(t, md, `| ≤ 10 requests per wave check ("a few", batched) | met |`)
	assert.Contains(t, md, "| 1 | Full render, 1,000 clusters × 20 apps")
	assert.Contains(t, md, "**600 ms**")
	assert.Contains(t, md, "16,480 builds, **82.4 s** (5.00 ms/build; measured on 100 clusters (1,600 builds), extrapolated linearly) = **137×**")
	assert.Contains(t, md, "**14 requests** in all (11× `POST /api/graphql`, 1× `GET /orgs/{org}/installation`, 1× `GET /orgs/{org}/teams`, 1× `POST /app/installations/{id}/access_tokens`), of which 0 per-repo reads = 0.00 per repo; **0 writes**")
	assert.Contains(t, md, "| ≤ 20 requests, 0 writes | met |")
	assert.Contains(t, md, "ratio **1.000** | within 10% of the minimum | met |")
	assert.Contains(t, md, "| < 1 s | **not met** |", "1.3 s incremental plan")
	assert.Contains(t, md, "one `kustomize build` process per cluster × app (v5.8.2) | 16,480 builds, **824 s** (50 ms/build; measured on 5 clusters, 80 builds, extrapolated linearly) = **1373×**")
	assert.Contains(t, md, "| **150 ms**; target repos touched: 1 (cluster-a); requests: 0 target reads, 4 target writes, 2 org-level reads, 4 control-repo reads | ≤ 0.2 s, reads ≤ touched + 2 | met |")
	assert.Contains(t, md, "p50 **1.00 ms**, p99 **3.00 ms** (max 0.00 ms); answers: 10,000 × 202; deepest queue **10** of 1000 (1 %) | p99 < 5 ms, queue ≤ 10 % | met |")
	assert.Contains(t, md, "Requests serve's jobs sent to GitHub meanwhile: 366 (120 `POST /api/graphql`, 80 `GET /orgs/{org}/teams`, 80 `GET /repos/{owner}/{repo}`, 80 `GET /repos/{owner}/{repo}/git/ref/{ref...}`, 6 others)")
	assert.Contains(t, md, "the sender (a process of its own, at niceness -10)")
	assert.Contains(t, md, "## Targets not met, and the plan")
	assert.Contains(t, md, "**Incremental plan: 1.30 s, target 1 s.**")
	assert.Contains(t, md, "| ≤ 0.3 s (issue 17); < 10 s, < 1 GiB on 2 cores (issue 9) | **not met** |", "a 600 ms render of 1,000 clusters")
	assert.Contains(t, md, "- **Render of 1,000 × 20** took 600 ms")
	assert.Contains(t, md, "| 6 | `fleetbot serve`'s `/status` page of 10,201 repos (10,000 clusters, 4 rollout waves), server-side: view built from the results, filtered, sorted, one page of 200 rows | slowest median **40 ms**: first page 40 ms (max 60 ms, 300 KiB); detail 20 ms (max 25 ms, 8 KiB) | < 200 ms a page (issue 22) | met |")
	assert.Contains(t, md, "**2,900 content-creating = 2.84 per new repo** (1020× `POST /orgs/{org}/repos`, 1020× `POST /{owner}/{repo}/git-receive-pack`, 860× `POST /repos/{owner}/{repo}/pulls`); at GitHub's content limits (80/min, 500/h) that many take at least **5h40m00s** | ≤ 3 per new repo; ≤ 6h00m00s for 1,000 clusters | met |")
	assert.Contains(t, md, "**1,000 content-creating = 1.00 per changed repo** (1000× `POST /{owner}/{repo}/git-receive-pack`); **2h00m00s** simulated in 3 runs (minimum 1h06m00s) | ≤ 1 per changed repo, ≤ 2h10m00s | met |")
	assert.Equal(t, 2, strings.Count(md, "**not met**"), "only the render and the incremental plan miss")

	r.github.OpenPRs.ContentCreating = 2000
	md = string(r.markdown())
	assert.Contains(t, md, "| ≤ 1 per changed repo, ≤ 2h10m00s | **not met** |")
	assert.Contains(t, md, "- **Change to open pull requests** (row 8) cost 2,000 content-creating requests for 1,000 repos")

	r.status.Pages[0].Median = 250 * time.Millisecond
	md = string(r.markdown())
	assert.Contains(t, md, "| < 200 ms a page (issue 22) | **not met** |")
	assert.Contains(t, md, "- **/status of 10,201 repos**: slowest page 250 ms.")
}

// TestReplicasRowsReportLostWorkAndTakeover: the replicas rows give lost work and the takeover
// spread from the end-to-end test's figures, mark them against issue 33's targets, explain a
// miss, and say "not measured" (with why) when the e2e tools were absent.
func TestReplicasRowsReportLostWorkAndTakeover(t *testing.T) {
	r := &results{replicasSkipped: "e2e tools absent"}
	md := string(r.markdown())
	assert.Contains(t, md, "| 10 | Replicas under SIGKILL: lost work and takeover time | not measured: e2e tools absent (the end-to-end test TestReplicasSurviveKills runs only with them: `FLEETBOT_E2E_TOOLS=$(make e2e-tools) make bench`) | lost work 0; takeover ≤ 15 s | |")
	assert.NotContains(t, md, "Replicas lost work")

	r.replicas = &replicasRun{Replicas: bench.Replicas{Replicas: 3, Seconds: 60, Kills: 14, LeaderKills: 7, ControlPushes: 40, PRUpdates: 41, Drifts: 39,
		Share: bench.Spread{N: 13, Min: 9.1, Median: 11.2, Max: 13.4}, Lead: bench.Spread{N: 7, Min: 8.9, Median: 10.4, Max: 12.0}, NotObserved: 1,
		Converged: true, OpenControlPRs: 3}}
	md = string(r.markdown())
	assert.Contains(t, md, "a replica killed every 4 s for 60 s (every other kill the leader) and replaced; 40 control pushes, 41 control pull request updates (3 pull requests), 39 drifts")
	assert.Contains(t, md, "lost work **0**: control pull request heads without a completed check after the resyncs **0** (checks the resyncs re-derived: 0), fleet converged (plan finds nothing): true; bot-branch moves not naming the head they replaced **0**; duplicate pull requests **0** | lost work 0, no stale move, no duplicate | met |")
	assert.Contains(t, md, "| 14 kills (7 of the leader); share: min 9.1 s, median **11.2 s**, max **13.4 s** (13); lead: min 8.9 s, median **10.4 s**, max **12.0 s** (7); not observed (the survivor was killed in turn first): 1 | ≤ 15 s (Lease duration 10 s + renewal 2 s) | met |")

	r.replicas.LostChecks, r.replicas.Failed = 2, "exit status 1"
	r.replicas.Share.Max = 16.8
	md = string(r.markdown())
	assert.Contains(t, md, "lost work **2**")
	assert.Contains(t, md, "; **the test failed**: exit status 1 | lost work 0, no stale move, no duplicate | **not met** |")
	assert.Contains(t, md, "- **Replicas lost work** (row 10): 2 control pull request heads without a completed check, converged true, 0 stale moves, 0 duplicate pull requests; the test failed: exit status 1.")
	assert.Contains(t, md, "- **Replica takeover** (row 10) took up to 16.8 s (share) and 12.0 s (lead), target 15 s.")
}
