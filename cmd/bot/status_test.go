package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/report"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// git runs the git CLI in dir.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Human", "-c", "user.email=human@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// statusRow is one repo of status -o json as the tests read it: its entry in the report's
// repos, with its status.
type statusRow struct {
	Repo          string   `json:"repo"`
	Kind          string   `json:"kind"`
	Action        string   `json:"action"`
	Provisions    []string `json:"provisions"`
	ProvisionedBy string   `json:"provisionedBy"`
	State         string   `json:"state"`
	WaitingOn     string   `json:"waitingOn"`
	Merged        string   `json:"merged"`
	Health        string   `json:"health"`
	Revision      string   `json:"revision"`
	URL           string   `json:"url"`
	PR            *struct {
		Number int    `json:"number"`
		Review string `json:"review"`
		Checks string `json:"checks"`
	} `json:"pr"`
}

// statusJSON is status -o json as the tests read it: the document's version and source, the
// view's summary, and each repo once.
type statusJSON struct {
	FormatVersion int
	Source        string
	Summary       struct {
		Total int `json:"total"`
	}
	Repos []statusRow
}

// statusDoc is status -o json: fleetbot's one report, each repo once in repos with its status,
// the view's summary in the status section.
type statusDoc struct {
	FormatVersion int    `json:"format_version"`
	Command       string `json:"command"`
	Source        string `json:"source"`
	Repos         []struct {
		Repo   string          `json:"repo"`
		Kind   string          `json:"kind"`
		Action string          `json:"action"`
		Status json.RawMessage `json:"status"`
	} `json:"repos"`
	Status struct {
		Source  string          `json:"source"`
		Summary json.RawMessage `json:"summary"`
		Repos   json.RawMessage `json:"repos"`
	} `json:"status"`
}

// decodeStatus decodes status -o json, checks that it has each repo once (in repos, with its
// status; none in the status section) and returns the rows.
func decodeStatus(t *testing.T, out string) (statusJSON, map[string]int) {
	t.Helper()
	var doc statusDoc
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, "status", doc.Command)
	assert.Equal(t, doc.Source, doc.Status.Source)
	assert.Empty(t, doc.Status.Repos, "each repo once, in one shape: no rows in the status section")
	s := statusJSON{FormatVersion: doc.FormatVersion, Source: doc.Source}
	require.NoError(t, json.Unmarshal(doc.Status.Summary, &s.Summary))
	idx := map[string]int{}
	for i, r := range doc.Repos {
		assert.NotEmpty(t, r.Action, r.Repo)
		require.NotEmpty(t, r.Status, "%s has its status", r.Repo)
		var row statusRow
		require.NoError(t, json.Unmarshal(r.Status, &row))
		row.Repo, row.Kind, row.Action = r.Repo, r.Kind, r.Action
		s.Repos = append(s.Repos, row)
		idx[r.Repo] = i
	}
	return s, idx
}

// TestStatusLocalForge: a fleet in mixed states on the local forge (open PRs, one merged by
// hand, one blocked by a human commit on the bot branch): rows, filters, JSON and exit codes.
func TestStatusLocalForge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	ctl := controlClone(t, nil)
	rev := gitIn(t, ctl, "rev-parse", "HEAD")
	path := filepath.Join(t.TempDir(), "forge")
	forge := "local:" + path
	code, _, errOut := cli(t, "apply", "--control", ctl, "--forge", forge)
	require.Equal(t, 0, code, errOut)

	code, out, errOut := cli(t, "status", "--control", ctl, "--forge", forge)
	require.Equal(t, 0, code, "nothing blocked yet: %s", errOut)
	assert.Contains(t, out, "fleetbot status of control revision "+rev[:7])
	assert.Regexp(t, `acme/cluster-prod-eu-1\s+cluster\s+env=prod,network=metal,region=eu\s+pr-open\s+`+rev[:7]+`\s+#1\s+\S+\s+review\s+-\s+unknown`, out)
	assert.Contains(t, out, "6 repos: 6 pr-open (waiting on 6 review); Flux health: 6 unknown")

	// A platform admin merges prod-eu-1's PR (a fast-forward of main); a human pushes to
	// edge-1's bot branch.
	git := filepath.Join(path, "acme")
	gitIn(t, t.TempDir(), "--git-dir", filepath.Join(git, "cluster-prod-eu-1.git"), "update-ref", "refs/heads/main", "refs/heads/fleetbot/sync")
	clone := filepath.Join(t.TempDir(), "edge")
	gitIn(t, t.TempDir(), "clone", "-q", "-b", "fleetbot/sync", filepath.Join(git, "cluster-edge-1.git"), clone)
	writeFile(t, filepath.Join(clone, "apps", "mine.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
	gitIn(t, clone, "add", "-A")
	gitIn(t, clone, "commit", "-q", "-m", "hand edit")
	gitIn(t, clone, "push", "-q", "origin", "fleetbot/sync")

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge)
	require.Equal(t, exitBlocked, code, "a repo is blocked on a human: exit 3\n%s%s", out, errOut)
	assert.Regexp(t, `acme/cluster-edge-1\s+cluster\s+env=prod,network=metal\s+blocked\s+`+rev[:7]+`\s+#1\s+\S+\s+human edit`, out)
	assert.Regexp(t, `acme/cluster-prod-eu-1\s+cluster\s+\S+\s+in-sync\s+`+rev[:7]+`\s+-\s+-\s+-\s+`+rev[:7], out, "merged revision")
	assert.Contains(t, out, "Needs attention:\n  acme/cluster-edge-1: blocked: commit ")
	assert.Contains(t, out, "6 repos: 1 blocked, 4 pr-open (waiting on 4 review), 1 in-sync")

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "-o", "json")
	require.Equal(t, exitBlocked, code, errOut)
	s, idx := decodeStatus(t, out)
	assert.Equal(t, report.FormatVersion, s.FormatVersion)
	assert.Equal(t, rev, s.Source)
	require.Len(t, s.Repos, 6)
	eu := s.Repos[idx["acme/cluster-prod-eu-1"]]
	assert.Equal(t, "in-sync", eu.State)
	assert.Equal(t, rev, eu.Merged)
	assert.Equal(t, "unknown", eu.Health, "the local forge has no commit statuses")
	assert.Equal(t, rev, eu.Revision)
	assert.Empty(t, eu.URL, "local repos have no web page")
	assert.Equal(t, "blocked", s.Repos[idx["acme/cluster-edge-1"]].State)

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "--blocked", "--format", "json")
	require.Equal(t, exitBlocked, code, errOut)
	s, _ = decodeStatus(t, out)
	require.Len(t, s.Repos, 1)
	assert.Equal(t, "acme/cluster-edge-1", s.Repos[0].Repo)

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "--selector", "region in (us,eu),env=prod", "-o", "json")
	require.Equal(t, 0, code, "edge-1 (no region) is not selected, so nothing shown is blocked: %s", errOut)
	s, _ = decodeStatus(t, out)
	var names []string
	for _, r := range s.Repos {
		names = append(names, r.Repo)
	}
	assert.Equal(t, []string{"acme/cluster-prod-eu-1", "acme/cluster-prod-us-1"}, names)

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "--repo", "cluster-staging-eu-1,acme/workspace-search", "-o", "json")
	require.Equal(t, 0, code, errOut)
	s, _ = decodeStatus(t, out)
	assert.Equal(t, 2, s.Summary.Total)
}

// TestStatusManagementRepos: management repos (issue 20) are rows of kind management with the
// clusters they provision, in text and JSON, and the filters treat them like the other repos.
func TestStatusManagementRepos(t *testing.T) {
	t.Parallel()
	ctl := filepath.Join("..", "..", "testdata", "provision", "control")
	forge := "local:" + filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", ctl, "--forge", forge)
	require.Equal(t, 0, code, errOut)

	code, out, errOut := cli(t, "status", "--control", ctl, "--forge", forge)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `acme/mgmt-hub-eu\s+management\s+-\s+pr-open\s`, out)
	assert.Regexp(t, `acme/capi-hub-us\s+management\s+-\s+pr-open\s`, out, "a management cluster's own repo pattern")
	assert.Contains(t, out, "\nProvisioned clusters by management repo:\n  acme/capi-hub-us: edge-3\n  acme/mgmt-hub-eu: prod-eu-2\n")
	assert.Contains(t, out, "5 repos: 5 pr-open")

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "--repo", "mgmt-hub-eu", "-o", "json")
	require.Equal(t, 0, code, errOut)
	s, _ := decodeStatus(t, out)
	require.Len(t, s.Repos, 1)
	assert.Equal(t, "management", s.Repos[0].Kind)
	assert.Equal(t, []string{"prod-eu-2"}, s.Repos[0].Provisions)

	code, out, errOut = cli(t, "status", "--control", ctl, "--forge", forge, "--selector", "env=prod", "-o", "json")
	require.Equal(t, 0, code, errOut)
	s, idx := decodeStatus(t, out)
	var names []string
	for _, r := range s.Repos {
		names = append(names, r.Repo)
	}
	assert.Equal(t, []string{"acme/cluster-prod-eu-1", "acme/cluster-prod-eu-2"}, names, "management repos carry no labels")
	assert.Equal(t, "acme/mgmt-hub-eu", s.Repos[idx["acme/cluster-prod-eu-2"]].ProvisionedBy)
}

func TestStatusBadInput(t *testing.T) {
	t.Parallel()
	forge := "local:" + filepath.Join(t.TempDir(), "forge")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repo", "cluster-nope"}, "--repo cluster-nope: no target repo of that name"},
		{[]string{"--selector", "env in (prod"}, "--selector: selector \"env in (prod\""},
		{[]string{"--format", "markdown"}, `invalid argument "markdown" for "-o, --format" flag: want one of text, json`},
		{[]string{"--interval", "0s"}, `invalid argument "0s" for "--interval" flag: want more than 0s`},
		{[]string{"--group-by", "waves"}, "--group-by: group by \"waves\": want kind, wave or label:KEY"},
	} {
		code, out, errOut := cli(t, append([]string{"status", "--control", exampleControl, "--forge", forge}, tc.args...)...)
		assert.Equal(t, 1, code, "%v", tc.args)
		assert.Empty(t, out, "%v: nothing printed", tc.args)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

// TestStatusGitHubForge: on the (fake) GitHub, status shows Flux health from the commit
// status of each default-branch head and the PR's review and checks, at exactly the cost of a
// plan, and of a no-op apply (the budget of a no-op reconcile): the batched scan carries them.
func TestStatusGitHubForge(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	ctl := controlClone(t, nil)
	rev := gitIn(t, ctl, "rev-parse", "HEAD")
	srv := fakeFleet(t)
	t.Setenv("GITHUB_API_URL", srv.APIURL())
	t.Setenv("GITHUB_TOKEN", githubtest.DefaultToken)
	t.Setenv("FLEETBOT_APP_ID", "")
	cache := t.TempDir()
	ghArgs := []string{"--control", ctl, "--forge", "github", "--github-cache", cache, "--mutation-interval=0"}
	code, _, errOut := cli(t, append([]string{"apply"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)

	// Merge prod-eu-1's PR; Flux reports the merged commit healthy, staging's base failing;
	// a CI check runs on prod-us-1's PR.
	ctx := context.Background()
	api := srv.Client()
	_, _, err := api.PullRequests.Merge(ctx, "acme", "cluster-prod-eu-1", 1, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	flux := func(repo, branch, state string) {
		_, _, err := api.Repositories.CreateStatus(ctx, "acme", repo, srv.Branch("acme", repo, branch),
			&gh.RepoStatus{State: gh.String(state), Context: gh.String("kustomization/flux-system")})
		require.NoError(t, err)
	}
	flux("cluster-prod-eu-1", "main", "success")
	flux("cluster-staging-eu-1", "main", "failure")
	flux("cluster-prod-us-1", "fleetbot/sync", "pending")

	code, _, errOut = cli(t, append([]string{"plan"}, ghArgs...)...) // reads the merged repo once
	require.Equal(t, 0, code, errOut)
	srv.ResetLog()
	code, _, errOut = cli(t, append([]string{"plan"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)
	planReqs := srv.Requests()
	srv.ResetLog()
	code, _, errOut = cli(t, append([]string{"status", "-o", "json"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)
	statusReqs := srv.Requests()
	assert.Equal(t, routesOf(planReqs), routesOf(statusReqs), "status costs what a plan costs")
	assert.Equal(t, 0, srv.Counts().Writes, "status writes nothing")

	// Once an apply has caught up (it deletes the merged PR's branch), status costs exactly
	// what the next, no-op, apply costs: the budget of a no-op reconcile. (--full: a merged PR
	// changes no desired state, so an incremental apply leaves its branch to the next full run.)
	code, _, errOut = cli(t, append([]string{"apply", "--full"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)
	srv.ResetLog()
	code, _, errOut = cli(t, append([]string{"status"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)
	statusNoop := srv.Requests()
	// --full: an incremental apply with nothing changed plans no repo and reads nothing at all;
	// status always shows every repo, so it costs what a full no-op apply costs.
	srv.ResetLog()
	code, _, errOut = cli(t, append([]string{"apply", "--full"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 0, srv.Counts().Writes, "the apply was a no-op")
	assert.Equal(t, routesOf(srv.Requests()), routesOf(statusNoop), "status costs what a full no-op apply costs")
	assert.Len(t, routesOf(statusNoop), 3, "one GraphQL page, the teams, the identity: %v", routesOf(statusNoop))
	srv.ResetLog()
	code, out, errOut := cli(t, append([]string{"status", "-o", "json"}, ghArgs...)...)
	require.Equal(t, 0, code, errOut)

	s, idx := decodeStatus(t, out)
	require.Len(t, s.Repos, 6)
	eu := s.Repos[idx["acme/cluster-prod-eu-1"]]
	assert.Equal(t, "in-sync", eu.State)
	assert.Equal(t, "success", eu.Health, "Flux's commit status on the merged head")
	assert.Equal(t, rev, eu.Merged, "the merged PR's source")
	assert.Equal(t, strings.TrimSuffix(srv.URL, "/")+"/acme/cluster-prod-eu-1", eu.URL)
	assert.Equal(t, "failure", s.Repos[idx["acme/cluster-staging-eu-1"]].Health)
	assert.Equal(t, "unknown", s.Repos[idx["acme/cluster-edge-1"]].Health, "no status posted")
	us := s.Repos[idx["acme/cluster-prod-us-1"]]
	require.NotNil(t, us.PR)
	assert.Equal(t, "pending", us.PR.Checks)
	assert.Equal(t, "checks", us.WaitingOn, "its checks still run")
	edge := s.Repos[idx["acme/cluster-edge-1"]]
	require.NotNil(t, edge.PR)
	assert.Equal(t, "review_required", edge.PR.Review, "branch protection requires a review nobody gave")
	assert.Equal(t, "review", edge.WaitingOn)
}

func routesOf(reqs []githubtest.Request) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		if r.Route != mintToken {
			out = append(out, r.Route)
		}
	}
	return out
}
