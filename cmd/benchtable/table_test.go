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
		}},
		github: &bench.GitHubResult{
			Clusters: 1000, Latency: 50 * time.Millisecond, Concurrency: 10,
			Noop: bench.Cost{Repos: 1020, Reads: 12, Requests: 14, Routes: map[string]int{
				"POST /api/graphql": 11, "GET /orgs/{org}/teams": 1, "POST /app/installations/{id}/access_tokens": 1, "GET /orgs/{org}/installation": 1}},
			Incremental: bench.Incremental{Load: 200 * time.Millisecond, Render: 200 * time.Millisecond, Plan: 900 * time.Millisecond, Org: 700 * time.Millisecond, OrgRequests: 12, Changed: 1},
			FanOut:      bench.FanOut{Repos: 1000, Runs: 8, Elapsed: 7*time.Hour + 6*time.Minute, ContentWrites: 4000, Minimum: 7*time.Hour + 6*time.Minute},
		},
		webhook: &bench.WebhookResult{Rate: 200, Deliveries: 2000, P50: time.Millisecond, P99: 2 * time.Millisecond, Statuses: map[int]int{202: 2000}, Jobs: map[string]int{"apply": 3}, JobsRun: 3},
	}
	md := string(r.markdown())
	assert.Contains(t, md, "| 1 | Full render, 1,000 clusters × 20 apps")
	assert.Contains(t, md, "**600 ms**")
	assert.Contains(t, md, "16,480 builds, **82.4 s** (5.00 ms/build; measured on 100 clusters (1,600 builds), extrapolated linearly) = **137×**")
	assert.Contains(t, md, "**14 requests** in all (11× `POST /api/graphql`, 1× `GET /orgs/{org}/installation`, 1× `GET /orgs/{org}/teams`, 1× `POST /app/installations/{id}/access_tokens`), of which 0 per-repo reads = 0.00 per repo; **0 writes**")
	assert.Contains(t, md, "| ≤ 20 requests, 0 writes | met |")
	assert.Contains(t, md, "ratio **1.000** | within 10% of the minimum | met |")
	assert.Contains(t, md, "| < 1 s | **not met** |", "1.3 s incremental plan")
	assert.Contains(t, md, "## Targets not met, and the plan")
	assert.Contains(t, md, "**Incremental plan: 1.30 s, target 1 s.**")
	assert.Equal(t, 1, strings.Count(md, "**not met**"), "only the incremental plan misses")
}
