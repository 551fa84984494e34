package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/action"
	"github.com/fleetbot-io/fleetbot/internal/ghaction"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/review"
)

// workflowToken is the fake's stand-in for the workflow's GITHUB_TOKEN.
const workflowToken = "ghs_workflowtoken0123456789"

// fakeFleet is the fake GitHub a control repo's workflow talks to: org acme with the
// example control repo's teams, the control repo itself, and a workflow token.
func fakeFleet(t *testing.T) *githubtest.Server {
	t.Helper()
	srv := githubtest.NewServer(t)
	for _, team := range []string{"platform", "payments-devs", "payments-sre", "search-devs", "search-sre"} {
		srv.CreateTeam("acme", team)
	}
	srv.AddToken("github-actions[bot]", workflowToken)
	srv.CreateRepo("acme", "control", readFiles(t, exampleControl))
	return srv
}

func readFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	}))
	return files
}

// openControlPR opens pull request "change" -> main on acme/control with one human commit.
func openControlPR(t *testing.T, srv *githubtest.Server) int {
	t.Helper()
	ctx := context.Background()
	c := srv.Client()
	main := srv.Branch("acme", "control", "main")
	_, _, err := c.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/change"), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(t, err)
	srv.Commit("acme", "control", "change", "tweak", map[string]string{"clusters/edge-1.yaml": readFiles(t, exampleControl)["clusters/edge-1.yaml"] + "# tweak\n"})
	p, _, err := c.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("tweak"), Head: gh.String("change"), Base: gh.String("main")})
	require.NoError(t, err)
	return p.GetNumber()
}

// simRunner is a simulated GitHub Actions runner: the default environment of a job on
// acme/control, a checkout in GITHUB_WORKSPACE, and fresh GITHUB_OUTPUT and
// GITHUB_STEP_SUMMARY files per step.
type simRunner struct {
	t         *testing.T
	env       map[string]string
	workspace string
	temp      string
	steps     int
}

func newSimRunner(t *testing.T, srv *githubtest.Server) *simRunner {
	t.Helper()
	temp := t.TempDir()
	ws := filepath.Join(temp, "work", "control")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	return &simRunner{t: t, workspace: ws, temp: temp, env: map[string]string{
		"GITHUB_ACTIONS":    "true",
		"GITHUB_REPOSITORY": "acme/control",
		"GITHUB_API_URL":    strings.TrimSuffix(srv.APIURL(), "/"),
		"GITHUB_SERVER_URL": srv.URL,
		"GITHUB_WORKSPACE":  ws,
		"GITHUB_RUN_ID":     "4242",
		"RUNNER_TEMP":       filepath.Join(temp, "runner-temp"),
		// action.yml sets this from github.token to tell it apart from a PAT in token.
		"FLEETBOT_WORKFLOW_TOKEN": workflowToken,
	}}
}

// checkout copies the example control repo to GITHUB_WORKSPACE/control.
func (r *simRunner) checkout() string {
	dst := filepath.Join(r.workspace, "control")
	require.NoError(r.t, os.RemoveAll(dst))
	require.NoError(r.t, os.CopyFS(dst, os.DirFS(exampleControl)))
	return dst
}

// event writes the payload as GitHub would and sets the event variables.
func (r *simRunner) event(name, sha, ref string, payload any) {
	b, err := json.Marshal(payload)
	require.NoError(r.t, err)
	path := filepath.Join(r.temp, "event.json")
	require.NoError(r.t, os.WriteFile(path, b, 0o644))
	r.env["GITHUB_EVENT_NAME"], r.env["GITHUB_EVENT_PATH"] = name, path
	r.env["GITHUB_SHA"], r.env["GITHUB_REF"] = sha, ref
}

// pullRequest sets the runner up for a pull_request event of action on
// acme/control #n, checked out at its merge commit sha.
func (r *simRunner) pullRequest(srv *githubtest.Server, n int, action, sha string) *gh.PullRequestEvent {
	r.t.Helper()
	payload, err := srv.PullRequestEvent("acme", "control", n, action)
	require.NoError(r.t, err)
	r.event("pull_request", sha, fmt.Sprintf("refs/pull/%d/merge", n), payload)
	var ev gh.PullRequestEvent
	require.NoError(r.t, payload.Decode(&ev))
	return &ev
}

// stepResult is what one step of `fleetbot action` left behind.
type stepResult struct {
	code           int
	stdout, stderr string
	outputs        map[string]string
	summary        string
}

// run runs `fleetbot action` as one step with inputs (INPUT_<NAME> as the runner sets them).
func (r *simRunner) run(inputs map[string]string) stepResult {
	r.t.Helper()
	r.steps++
	env := map[string]string{}
	for k, v := range r.env {
		env[k] = v
	}
	stepDir := filepath.Join(r.temp, "step", strings.Repeat("x", r.steps))
	require.NoError(r.t, os.MkdirAll(stepDir, 0o755))
	require.NoError(r.t, os.MkdirAll(env["RUNNER_TEMP"], 0o755))
	env["GITHUB_OUTPUT"] = filepath.Join(stepDir, "output")
	env["GITHUB_STEP_SUMMARY"] = filepath.Join(stepDir, "summary")
	for _, f := range []string{env["GITHUB_OUTPUT"], env["GITHUB_STEP_SUMMARY"]} {
		require.NoError(r.t, os.WriteFile(f, nil, 0o644))
	}
	for k, v := range inputs {
		env["INPUT_"+strings.ToUpper(k)] = v
	}
	var stdout, stderr bytes.Buffer
	a := &frontend{stdout: &stdout, stderr: &stderr}
	root := a.rootCommand()
	for _, c := range root.Commands() {
		if c.Name() == "action" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(a.newActionCommand(func(k string) string { return env[k] }))
	// The wall clock runs these steps: no second between mutations (forge/github tests the
	// interval on the fake's clock).
	root.SetArgs([]string{"action", "--mutation-interval=0"})
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	res := stepResult{}
	err := root.ExecuteContext(context.Background())
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		res.code = int(code)
	default:
		res.code = 1
		stderr.WriteString("error: " + err.Error() + "\n")
	}
	res.stdout, res.stderr = stdout.String(), stderr.String()
	out, err := ghaction.ReadOutputs(env["GITHUB_OUTPUT"])
	require.NoError(r.t, err)
	res.outputs = out
	b, err := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	require.NoError(r.t, err)
	res.summary = string(b)
	return res
}

// appInputs are the inputs of a control repo workflow with the App configured.
func appInputs(srv *githubtest.Server, mode string) map[string]string {
	return map[string]string{
		"MODE": mode, "CONTROL-DIR": "control", "APP_ID": "1", "PRIVATE_KEY": string(srv.AppPrivateKeyPEM()),
		"TOKEN": workflowToken,
	}
}

// mintToken is the App's request for an installation token: a POST that changes nothing
// in any repository.
const mintToken = "POST /app/installations/{id}/access_tokens"

// targetWrites returns the mutating requests that did not go to acme/control.
func targetWrites(srv *githubtest.Server) []string {
	var out []string
	for _, r := range srv.Requests() {
		if r.Class != githubtest.Read && r.Route != mintToken && r.Repo != "acme/control" {
			out = append(out, r.Repo+": "+r.Method+" "+r.Path)
		}
	}
	return out
}

// routes returns the routes of the requests of class, but for minting installation tokens.
func routes(srv *githubtest.Server, class githubtest.Class) []string {
	var out []string
	for _, r := range srv.Requests() {
		if r.Class == class && r.Route != mintToken {
			out = append(out, r.Route)
		}
	}
	return out
}

// writes returns every mutating request to a repository.
func writes(srv *githubtest.Server) []string {
	return append(routes(srv, githubtest.Write), routes(srv, githubtest.ContentCreating)...)
}

func TestActionPlanOnPullRequest(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	n := openControlPR(t, srv)
	run := newSimRunner(t, srv)
	run.checkout()
	ev := run.pullRequest(srv, n, "opened", "feedc0de00000000000000000000000000000001")
	srv.ResetLog()

	step := run.run(appInputs(srv, "plan"))
	require.Equal(t, 0, step.code, step.stderr)

	assert.Contains(t, step.summary, action.PlanMarker)
	assert.Contains(t, step.summary, "## fleetbot plan: ✅ valid")
	assert.Contains(t, step.summary, "#1 merged into `main`")
	assert.Contains(t, step.summary, "6 repos: 6 create")
	assert.Contains(t, step.summary, "`acme/cluster-prod-eu-1`")

	var changed []string
	require.NoError(t, json.Unmarshal([]byte(step.outputs["changed-repos"]), &changed))
	assert.Len(t, changed, 6)
	assert.Contains(t, changed, "acme/workspace-payments")
	assert.Equal(t, "[]", step.outputs["pull-requests"], "plan opens nothing")
	assert.Equal(t, filepath.Join(run.env["RUNNER_TEMP"], action.PlanJSONName), step.outputs["plan-json"])
	assert.Equal(t, "2", step.outputs["exit-code"], "changes pending, as plan --detailed-exitcode")
	assert.Equal(t, "[]", step.outputs["blocked-repos"])
	var res action.Result
	b, err := os.ReadFile(step.outputs["plan-json"])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	assert.True(t, res.Valid)
	assert.Equal(t, 1, res.PullRequest)
	assert.Equal(t, ev.GetPullRequest().GetBase().GetSHA(), res.Base)

	comments := srv.Comments("acme", "control", n)
	require.Len(t, comments, 1)
	assert.True(t, strings.HasPrefix(comments[0], action.PlanMarker))
	assert.Contains(t, comments[0], "6 repos: 6 create")
	assert.Empty(t, targetWrites(srv), "plan never writes to a target repo")
	assert.Equal(t, []string{"POST /repos/{owner}/{repo}/issues/{number}/comments"}, routes(srv, githubtest.ContentCreating))

	// Credentials are masked before anything else, and never printed otherwise.
	require.True(t, strings.HasPrefix(step.stdout, "::add-mask::"), step.stdout)
	assert.Contains(t, step.stdout, "::add-mask::"+workflowToken+"\n")
	keyLine := strings.Split(string(srv.AppPrivateKeyPEM()), "\n")[1]
	assert.Contains(t, step.stdout, "::add-mask::"+keyLine+"\n")
	for _, line := range strings.Split(step.stdout, "\n") {
		if !strings.HasPrefix(line, "::add-mask::") {
			assert.NotContains(t, line, workflowToken)
			assert.NotContains(t, line, keyLine)
		}
	}
	assert.NotContains(t, step.stderr, workflowToken)
	assert.NotContains(t, step.summary+comments[0], workflowToken)

	t.Run("a second run edits the same comment", func(t *testing.T) {
		dir := run.checkout()
		writeFile(t, filepath.Join(dir, "clusters", "edge-2.yaml"),
			strings.ReplaceAll(readFiles(t, exampleControl)["clusters/edge-1.yaml"], "edge-1", "edge-2"))
		run.pullRequest(srv, n, "synchronize", "feedc0de00000000000000000000000000000002")
		srv.ResetLog()

		step := run.run(appInputs(srv, "plan"))
		require.Equal(t, 0, step.code, step.stderr)
		comments := srv.Comments("acme", "control", n)
		require.Len(t, comments, 1, "still one comment")
		assert.Contains(t, comments[0], "7 repos: 7 create")
		assert.Contains(t, comments[0], "feedc0de0000")
		assert.Equal(t, []string{"PATCH /repos/{owner}/{repo}/issues/comments/{id}"}, routes(srv, githubtest.Write))
		assert.Empty(t, routes(srv, githubtest.ContentCreating))

		// The same plan again: nothing to edit.
		srv.ResetLog()
		step = run.run(appInputs(srv, "plan"))
		require.Equal(t, 0, step.code, step.stderr)
		assert.Empty(t, writes(srv), "an unchanged plan comment is not rewritten")
	})
}

func TestActionApplyOnPush(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	run := newSimRunner(t, srv)
	run.checkout()
	ev, err := srv.PushEvent("acme", "control", "main", "")
	require.NoError(t, err)
	sha := srv.Branch("acme", "control", "main")
	run.event("push", sha, "refs/heads/main", ev)

	step := run.run(appInputs(srv, "apply"))
	require.Equal(t, 0, step.code, step.stdout+step.stderr)
	// The log: the progress of each phase (a line per tenth; six repos: when done), the table
	// of the repos that changed, and the summary line last.
	assert.Contains(t, step.stdout, "fleetbot: applied 6 of 6 repos\n")
	assert.Regexp(t, `\nacme/cluster-prod-eu-1 +cluster +create +#1 `, step.stdout)
	assert.True(t, strings.HasSuffix(step.stdout, "\n6 repos: 6 create (source "+sha[:12]+")\n"), step.stdout)
	assert.Contains(t, step.summary, "## fleetbot apply\n")
	assert.Contains(t, step.summary, "6 repos: 6 create")

	var pulls []action.PullRequestOutput
	require.NoError(t, json.Unmarshal([]byte(step.outputs["pull-requests"]), &pulls))
	require.Len(t, pulls, 6, step.outputs["pull-requests"])
	for _, p := range pulls {
		owner, repo, _ := strings.Cut(p.Repo, "/")
		open := srv.Pulls(owner, repo)
		require.Len(t, open, 1, p.Repo)
		assert.Equal(t, open[0].GetNumber(), p.Number, p.Repo)
		assert.Equal(t, "fleetbot/sync", open[0].GetHead().GetRef(), p.Repo)
		assert.NotEmpty(t, p.URL, p.Repo)
	}
	var changed []string
	require.NoError(t, json.Unmarshal([]byte(step.outputs["changed-repos"]), &changed))
	assert.Len(t, changed, 6)

	t.Run("again: noop, no write", func(t *testing.T) {
		srv.ResetLog()
		step := run.run(appInputs(srv, "apply"))
		require.Equal(t, 0, step.code, step.stdout+step.stderr)
		assert.Contains(t, step.summary, "6 repos: 6 noop")
		assert.Equal(t, "[]", step.outputs["changed-repos"])
		assert.Equal(t, "0", step.outputs["exit-code"], "nothing to do")
		assert.Empty(t, writes(srv))
	})

	t.Run("a human edit on a bot branch: exit-code 3 and blocked-repos", func(t *testing.T) {
		srv.Commit("acme", "cluster-edge-1", "fleetbot/sync", "hand edit", map[string]string{"apps/mine.yaml": "kind: ConfigMap\n"})
		step := run.run(appInputs(srv, "apply"))
		require.Equal(t, 0, step.code, "a blocked repo is not a failed step: %s", step.stdout+step.stderr)
		assert.Equal(t, "3", step.outputs["exit-code"], "blocked on a human, as apply --detailed-exitcode")
		assert.Equal(t, `["acme/cluster-edge-1"]`, step.outputs["blocked-repos"])
		assert.Contains(t, step.summary, "1 blocked, 5 noop")
	})

	t.Run("a push to another branch is skipped", func(t *testing.T) {
		run.env["GITHUB_REF"] = "refs/heads/feature"
		defer func() { run.env["GITHUB_REF"] = "refs/heads/main" }()
		srv.ResetLog()
		step := run.run(appInputs(srv, "apply"))
		require.Equal(t, 0, step.code, step.stderr)
		assert.Contains(t, step.stdout, "::notice title=fleetbot::apply skipped: refs/heads/feature is not the default branch main")
		assert.Empty(t, srv.Requests())
	})
}

func TestActionApplyWithOnlyTheWorkflowToken(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	run := newSimRunner(t, srv)
	run.checkout()
	ev, err := srv.PushEvent("acme", "control", "main", "")
	require.NoError(t, err)
	run.event("push", srv.Branch("acme", "control", "main"), "refs/heads/main", ev)
	srv.ResetLog()

	for name, inputs := range map[string]map[string]string{
		"token input is github.token": {"MODE": "apply", "CONTROL-DIR": "control", "TOKEN": workflowToken},
		"no token input":              {"MODE": "apply", "CONTROL-DIR": "control"},
	} {
		t.Run(name, func(t *testing.T) {
			step := run.run(inputs)
			assert.Equal(t, 1, step.code)
			assert.Contains(t, step.stderr, "apply fans out to other repos; GITHUB_TOKEN can only write to acme/control. Set app-id and private-key (see docs/action.md)")
			assert.Empty(t, srv.Requests(), "nothing was attempted")
		})
	}

	t.Run("a personal access token is allowed", func(t *testing.T) {
		in := map[string]string{"MODE": "apply", "CONTROL-DIR": "control", "TOKEN": githubtest.DefaultToken}
		step := run.run(in)
		require.Equal(t, 0, step.code, step.stdout+step.stderr)
		assert.Contains(t, step.summary, "6 repos: 6 create")
		assert.Contains(t, step.stdout, "::add-mask::"+githubtest.DefaultToken)
	})
}

func TestActionValidationErrorsBecomeAnnotations(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	n := openControlPR(t, srv)
	run := newSimRunner(t, srv)
	dir := run.checkout()
	p := filepath.Join(dir, "clusters", "prod-eu-1.yaml")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	broken := strings.Replace(string(b), "workspace: payments", "workspace: paymnts", 1)
	broken = strings.Replace(broken, "  admins: [payments-sre]\n", "  admins: [payments-sre]\n  replicas: 3\n", 1)
	writeFile(t, p, broken)
	run.pullRequest(srv, n, "opened", "feedc0de00000000000000000000000000000003")
	srv.ResetLog()

	step := run.run(appInputs(srv, "plan"))
	assert.Equal(t, 1, step.code)
	assert.Contains(t, step.stdout,
		"::error file=control/clusters/prod-eu-1.yaml,line=7,title=fleetbot::unknown workspace \"paymnts\"%0Ahint: add workspaces/paymnts.yaml or use one of: payments, search\n")
	assert.Contains(t, step.stdout, "::error file=control/clusters/prod-eu-1.yaml,line=9,title=fleetbot::unknown field \"replicas\" in spec")
	assert.Contains(t, step.stderr, "2 problem(s)")
	assert.Contains(t, step.summary, "## fleetbot plan: ❌ 2 problem(s)")
	assert.Contains(t, step.summary, "| `control/clusters/prod-eu-1.yaml:9` | unknown field \"replicas\" in spec |")
	comments := srv.Comments("acme", "control", n)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "❌ 2 problem(s)")
	assert.Empty(t, targetWrites(srv))
	for _, r := range srv.Requests() {
		assert.True(t, strings.HasPrefix(r.Path, "/api/v3/repos/acme/control/"), "an invalid control repo reads no target repo: %s", r.Path)
	}
	var res action.Result
	b, err = os.ReadFile(step.outputs["plan-json"])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	assert.False(t, res.Valid)
	require.Len(t, res.Issues, 2)
	assert.Equal(t, "control/clusters/prod-eu-1.yaml", res.Issues[0].Pos.File)

	t.Run("apply writes nothing either", func(t *testing.T) {
		ev, err := srv.PushEvent("acme", "control", "main", "")
		require.NoError(t, err)
		run.event("push", srv.Branch("acme", "control", "main"), "refs/heads/main", ev)
		srv.ResetLog()
		step := run.run(appInputs(srv, "apply"))
		assert.Equal(t, 1, step.code)
		assert.Contains(t, step.stdout, "::error file=control/clusters/prod-eu-1.yaml,line=9,")
		assert.Contains(t, step.summary, "nothing written")
		assert.Empty(t, writes(srv))
	})
}

func TestActionPlanWithoutTheApp(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	n := openControlPR(t, srv)
	run := newSimRunner(t, srv)
	run.checkout()
	run.pullRequest(srv, n, "opened", "feedc0de00000000000000000000000000000004")
	srv.ResetLog()

	step := run.run(map[string]string{"MODE": "plan", "CONTROL-DIR": "control"})
	require.Equal(t, 0, step.code, step.stderr)
	assert.Contains(t, step.summary, "The target repos were not read")
	assert.Contains(t, step.summary, "| `acme/cluster-prod-eu-1` | cluster |")
	assert.Equal(t, "[]", step.outputs["changed-repos"])
	require.Len(t, srv.Comments("acme", "control", n), 1)
	for _, r := range srv.Requests() {
		assert.True(t, strings.HasPrefix(r.Path, "/api/v3/repos/acme/control/"), "only the control repo is touched: %s", r.Path)
	}
}

func TestActionPlanCommentFailureIsAWarning(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	n := openControlPR(t, srv)
	run := newSimRunner(t, srv)
	run.checkout()
	run.pullRequest(srv, n, "opened", "feedc0de00000000000000000000000000000005")
	run.env["FLEETBOT_WORKFLOW_TOKEN"] = "ghs_revoked"
	step := run.run(map[string]string{"MODE": "plan", "CONTROL-DIR": "control"})
	require.Equal(t, 0, step.code, step.stderr)
	assert.Contains(t, step.stdout, "::warning title=fleetbot::could not write the plan comment (the job summary has the plan)")
	assert.Contains(t, step.summary, "fleetbot plan: ✅ valid")
	assert.Empty(t, srv.Comments("acme", "control", n))
}

func TestActionCheckTargetRepo(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	for _, tc := range []struct {
		mode, repo, golden, humanFile string
	}{
		{action.ModeCheckWorkspace, "acme/workspace-payments", "workspace-payments", "apps/role.yaml"},
		{action.ModeCheckCluster, "acme/cluster-prod-eu-1", "cluster-prod-eu-1", "apps/bad.yaml"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			run := newSimRunner(t, srv)
			run.env["GITHUB_REPOSITORY"] = tc.repo
			run.event("pull_request", "feedc0de00000000000000000000000000000006", "refs/pull/3/merge", map[string]any{"number": 3})
			require.NoError(t, os.RemoveAll(run.workspace))
			require.NoError(t, os.CopyFS(run.workspace, os.DirFS(filepath.Join(goldenDir, tc.golden))))

			step := run.run(map[string]string{"MODE": tc.mode})
			require.Equal(t, 0, step.code, step.stdout+step.stderr)
			assert.Contains(t, step.summary, "✅ No problems in")

			// A human adds a file to apps/: a cluster-scoped object in a workspace repo, a
			// remote base in a cluster repo.
			kust := filepath.Join(run.workspace, "apps", "kustomization.yaml")
			b, err := os.ReadFile(kust)
			require.NoError(t, err)
			base := filepath.Base(tc.humanFile)
			if tc.mode == action.ModeCheckWorkspace {
				writeFile(t, filepath.Join(run.workspace, tc.humanFile), "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reader\nrules: []\n")
				writeFile(t, kust, strings.Replace(string(b), "resources: []", "resources:\n- "+base, 1))
			} else {
				writeFile(t, kust, strings.Replace(string(b), "resources: []", "resources:\n- https://github.com/evil/repo//deploy?ref=main", 1))
			}
			step = run.run(map[string]string{"MODE": tc.mode})
			assert.Equal(t, 1, step.code, step.stdout)
			assert.Contains(t, step.stdout, "::error file=apps/")
			assert.Contains(t, step.summary, "| `apps/")
		})
	}
	assert.Empty(t, srv.Requests(), "checks are offline")
}

func TestActionOutsideARunner(t *testing.T) {
	t.Parallel()
	if os.Getenv("GITHUB_ACTIONS") == "true" {
		t.Skip("running inside GitHub Actions: the environment is a real runner's")
	}
	code, _, errOut := cli(t, "action")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not running in a GitHub Actions step")
}

func TestActionMissingTeamIsAnAnnotation(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	for _, team := range []string{"platform", "payments-devs", "payments-sre", "search-devs"} {
		srv.CreateTeam("acme", team)
	}
	srv.AddToken("github-actions[bot]", workflowToken)
	srv.CreateRepo("acme", "control", readFiles(t, exampleControl))
	n := openControlPR(t, srv)
	run := newSimRunner(t, srv)
	run.checkout()
	run.pullRequest(srv, n, "opened", "feedc0de00000000000000000000000000000007")

	step := run.run(appInputs(srv, "plan"))
	assert.Equal(t, 1, step.code)
	assert.Regexp(t, `::error file=control/clusters/staging-eu-1\.yaml,line=\d+,title=fleetbot::.*search-sre`, step.stdout)
	assert.Contains(t, step.summary, "❌ 1 problem(s)")
	assert.NotContains(t, step.summary, "| repo | kind | action |", "nothing was planned")
	require.Len(t, srv.Comments("acme", "control", n), 1)
}

// gitCheckout makes GITHUB_WORKSPACE a git clone holding the control repo under control/ at a
// base commit and, on top, a head commit with edit applied, as actions/checkout with
// fetch-depth: 2 leaves it; it returns both commits.
func (r *simRunner) gitCheckout(edit func(dir string)) (base, head string) {
	r.t.Helper()
	require.NoError(r.t, os.RemoveAll(r.workspace))
	repo, err := git.PlainInit(r.workspace, false)
	require.NoError(r.t, err)
	wt, err := repo.Worktree()
	require.NoError(r.t, err)
	commit := func(msg string) string {
		require.NoError(r.t, wt.AddWithOptions(&git.AddOptions{All: true}))
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "alice", Email: "alice@example.com"}})
		require.NoError(r.t, err)
		return h.String()
	}
	dir := r.checkout()
	base = commit("base")
	edit(dir)
	head = commit("change")
	return base, head
}

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old, path)
	writeFile(t, path, strings.Replace(string(b), old, new, 1))
}

// TestActionPlanReviewsTheChange runs check control on the PR: who wrote the change decides
// whether it needs a platform admin, with the author's teams read as the App.
func TestActionPlanReviewsTheChange(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	srv.AddTeamMember("acme", "payments-devs", "alice", "member")
	n := openControlPR(t, srv)
	for _, tc := range []struct {
		name, file, old, new, verdict string
	}{
		{"a workspace admin changes the workspace's apps", "workspaces/payments.yaml", `podinfo_replicas: "2"`, `podinfo_replicas: "3"`, review.Allowed},
		{"a workspace admin changes a cluster", "clusters/prod-eu-1.yaml", "10.10.0.0/24", "10.10.8.0/24", review.NeedsPlatformAdmin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := newSimRunner(t, srv)
			base, head := run.gitCheckout(func(dir string) { editFile(t, filepath.Join(dir, tc.file), tc.old, tc.new) })
			ev, err := srv.PullRequestEvent("acme", "control", n, "synchronize")
			require.NoError(t, err)
			ev.Set("pull_request.base.sha", base)
			ev.Set("pull_request.head.sha", head)
			ev.Set("pull_request.user.login", "alice")
			run.event("pull_request", head, "refs/pull/1/merge", ev)

			step := run.run(appInputs(srv, "plan"))
			require.Equal(t, 0, step.code, step.stdout+step.stderr)
			assert.Contains(t, step.summary, "### fleetbot check control")
			assert.Contains(t, step.summary, tc.verdict)
			assert.Contains(t, step.summary, "by @alice")
			assert.Contains(t, step.summary, "| `"+tc.file+"` |")
			if tc.verdict == review.Allowed {
				assert.Contains(t, step.summary, "by @alice (teams: payments-devs)", "read from GitHub as the App")
			}
			if tc.verdict == review.NeedsPlatformAdmin {
				assert.Contains(t, step.stdout, "::notice title=fleetbot check control::this change needs a platform admin's review")
			} else {
				assert.NotContains(t, step.stdout, "::notice")
			}
			var res action.Result
			b, err := os.ReadFile(step.outputs["plan-json"])
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &res))
			require.NotNil(t, res.Review)
			assert.Equal(t, tc.verdict, res.Review.Verdict)
		})
	}

	t.Run("a shallow clone skips the review with a note", func(t *testing.T) {
		run := newSimRunner(t, srv)
		_, head := run.gitCheckout(func(dir string) {
			editFile(t, filepath.Join(dir, "workspaces/payments.yaml"), `podinfo_replicas: "2"`, `podinfo_replicas: "4"`)
		})
		ev, err := srv.PullRequestEvent("acme", "control", n, "synchronize")
		require.NoError(t, err)
		run.event("pull_request", head, "refs/pull/1/merge", ev) // base.sha is not in the clone
		step := run.run(appInputs(srv, "plan"))
		require.Equal(t, 0, step.code, step.stderr)
		assert.Contains(t, step.summary, "check control skipped: the base commit")
		assert.Contains(t, step.summary, "fetch-depth: 2")
	})
}

func TestActionApplyFailureIsAnnotated(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	run := newSimRunner(t, srv)
	run.checkout()
	ev, err := srv.PushEvent("acme", "control", "main", "")
	require.NoError(t, err)
	run.event("push", srv.Branch("acme", "control", "main"), "refs/heads/main", ev)
	srv.Fault("POST /orgs/{org}/repos", githubtest.FaultSpec{Status: 422, Times: 1})

	step := run.run(appInputs(srv, "apply"))
	assert.Equal(t, 1, step.code)
	assert.Regexp(t, `::error title=fleetbot::acme/[a-z0-9-]+: failed: `, step.stdout)
	assert.Contains(t, step.summary, "## fleetbot apply: ⚠️ 1 repo(s) failed")
	var pulls []action.PullRequestOutput
	require.NoError(t, json.Unmarshal([]byte(step.outputs["pull-requests"]), &pulls))
	assert.Len(t, pulls, 5, "the other repos got their PRs")
}

// TestActionCheckWorkspaceLevelAndAllowlist: check-workspace holds the repo to the workspace's
// Pod Security level and the platform's allowlist as its inputs say (a workspace repo's CI
// cannot read the control repo): a pod that baseline admits and restricted refuses fails by
// default and passes with pod-security: baseline; a kind the platform added passes only with
// allow; privileged is refused as a level.
func TestActionCheckWorkspaceLevelAndAllowlist(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	run := newSimRunner(t, srv)
	run.env["GITHUB_REPOSITORY"] = "acme/workspace-payments"
	run.event("pull_request", "feedc0de00000000000000000000000000000008", "refs/pull/4/merge", map[string]any{"number": 4})
	require.NoError(t, os.RemoveAll(run.workspace))
	require.NoError(t, os.CopyFS(run.workspace, os.DirFS(filepath.Join(goldenDir, "workspace-payments"))))
	kust := filepath.Join(run.workspace, "apps", "kustomization.yaml")
	b, err := os.ReadFile(kust)
	require.NoError(t, err)
	writeFile(t, kust, strings.Replace(string(b), "resources: []", "resources:\n- web.yaml\n- monitor.yaml", 1))
	// Runs as root with the default capabilities: baseline admits it, restricted does not.
	writeFile(t, filepath.Join(run.workspace, "apps", "web.yaml"), "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n"+
		"  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: nginx}]\n")
	writeFile(t, filepath.Join(run.workspace, "apps", "monitor.yaml"), "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  endpoints: [{port: http}]\n")

	step := run.run(map[string]string{"MODE": action.ModeCheckWorkspace})
	assert.Equal(t, 1, step.code, step.stdout)
	assert.Regexp(t, `::error file=apps/web\.yaml,line=\d+.*restricted`, step.stdout)
	assert.Regexp(t, `::error file=apps/monitor\.yaml.*ServiceMonitor`, step.stdout)

	step = run.run(map[string]string{"MODE": action.ModeCheckWorkspace, "POD-SECURITY": "baseline", "ALLOW": "ServiceMonitor.monitoring.coreos.com"})
	assert.Equal(t, 0, step.code, step.stdout+step.stderr)
	assert.Contains(t, step.summary, "✅ No problems in")

	step = run.run(map[string]string{"MODE": action.ModeCheckWorkspace, "POD-SECURITY": "privileged"})
	assert.Equal(t, 1, step.code)
	assert.Contains(t, step.stdout+step.stderr, `input pod-security "privileged": a workspace namespace is restricted (the default) or baseline`)
	assert.Empty(t, srv.Requests(), "checks are offline")
}
