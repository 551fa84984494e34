// Package action is fleetbot's GitHub Action front end (action.yml): it reads the runner's
// environment and the action's inputs, runs the application's plan, apply or target-repo
// check (package app) and writes annotations, step outputs and the job summary. It holds no
// composition of its own: the forge, renderer and budget come from app.Config.
package action

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/app"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/ghaction"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// Modes of the action (input mode).
const (
	ModePlan           = "plan"
	ModeApply          = "apply"
	ModeCheckWorkspace = "check-workspace"
	ModeCheckCluster   = "check-cluster"
)

// PlanMarker opens fleetbot's one plan comment on a control-repo pull request; the next run
// finds the comment by it and edits it instead of adding another.
const PlanMarker = "<!-- fleetbot:plan -->"

// maxCommentBytes keeps a comment under GitHub's 65,536-character body limit.
const maxCommentBytes = 65000

// At fleet scale the step says what matters and stays bounded: the log lists at most logRows
// repos, the job summary (and the plan comment) at most summaryRows, the most urgent first
// (failed, blocked, deferred before the changes), each followed by how many more there are and
// where every repo is (the plan-json file); warnings are folded, one line per text with its
// count. The job summary is also cut to ghaction.MaxSummaryBytes, GitHub's limit per step.
const (
	logRows     = 50
	summaryRows = 100
)

// Step outputs of the action (action.yml outputs).
const (
	outputChangedRepos = "changed-repos"
	outputPullRequests = "pull-requests"
	outputPlanJSON     = "plan-json"
	outputBlockedRepos = "blocked-repos"
	outputExitCode     = "exit-code"
)

// InputNames are the inputs action.yml declares, each read by readActionInputs.
func InputNames() []string {
	return []string{"mode", "control-dir", "app-id", "private-key", "token", "github-url", "allow-removals", "name", "namespace", "pod-security", "allow", "cache-dir"}
}

// OutputNames are the step outputs finish writes.
func OutputNames() []string {
	return []string{outputChangedRepos, outputPullRequests, outputPlanJSON, outputBlockedRepos, outputExitCode}
}

// PlanJSONName is the file, under RUNNER_TEMP, that the plan-json output names.
const PlanJSONName = "fleetbot-plan.json"

// Help is the help text of fleetbot action.
const Help = `action is what fleetbot's GitHub Action (action.yml) runs. It takes no flags:
it reads the runner's environment (GITHUB_EVENT_NAME, GITHUB_EVENT_PATH,
GITHUB_REPOSITORY, GITHUB_SHA, GITHUB_REF, GITHUB_API_URL, GITHUB_WORKSPACE,
RUNNER_TEMP) and the action's inputs (INPUT_MODE, INPUT_CONTROL_DIR,
INPUT_APP_ID, INPUT_PRIVATE_KEY, INPUT_TOKEN, INPUT_GITHUB_URL,
INPUT_ALLOW_REMOVALS, INPUT_NAME, INPUT_CACHE_DIR), and writes step outputs (changed-repos,
pull-requests, plan-json) to GITHUB_OUTPUT, the plan as markdown to
GITHUB_STEP_SUMMARY, validation errors as annotations on file and line, and
masks every credential first. See docs/action.md.

  plan             on pull_request: validate, review the change (check
                   control), plan against the target repos (read-only), one
                   plan comment on the PR, edited in place; exit 1 on
                   validation errors
  apply            on push to the default branch (or workflow_dispatch,
                   schedule): open, update or close the PRs in every target
                   repo; needs a GitHub App (app-id, private-key) or a token
                   that can write to them
  check-workspace  in a workspace / cluster repo: render its human-owned
  check-cluster    kustomizations offline (check workspace / check cluster)`

// Options are what the CLI passes to a run: its output streams, the runner's environment,
// and the global flags that apply to the Action too.
type Options struct {
	Stdout, Stderr io.Writer
	// Getenv reads the runner's environment (os.Getenv; tests pass a simulated runner's).
	Getenv func(string) string
	Logger *slog.Logger
	// Budget is the write budget of --content-per-minute, --content-per-hour, --max-wait and
	// --mutation-interval.
	Budget ghforge.BudgetConfig
	// CacheDir is --github-cache: the snapshot cache when the cache-dir input is empty
	// ("", "off" or "none": for the run only).
	CacheDir string
	// GitURL is --git-url: the base URL of target repos in Flux objects ("": the web root of
	// the GitHub the API URL names).
	GitURL string
	// Version is fleetbot's version, shown in the summary and salting the baseline.
	Version string
}

// Run runs one step of fleetbot's Action. A problem the step reports (validation errors,
// failed repos) ends it with an app.ExitCode.
func Run(ctx context.Context, o Options) error {
	env, err := ghaction.FromEnv(o.Getenv)
	if err != nil {
		return fmt.Errorf("%w (fleetbot action runs inside a workflow step; use plan/apply elsewhere)", err)
	}
	cmds := ghaction.NewCommands(o.Stdout)
	in, err := readActionInputs(env, cmds)
	if err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &actionRun{opts: o, env: env, in: in, cmds: cmds, log: log}
	return r.run(ctx)
}

// actionInputs are the inputs of action.yml, resolved and checked.
type actionInputs struct {
	mode string
	// controlDir is the control repo directory; controlRel is the same relative to
	// GITHUB_WORKSPACE, slash-separated, for annotations ("." for the root).
	controlDir, controlRel string
	appID                  int64
	privateKey             []byte
	// token writes to the workflow's own repo (the plan comment).
	token string
	// fanoutToken reads and writes the target repos when no App is given: a token that is not
	// the workflow's GITHUB_TOKEN, which can only reach its own repo.
	fanoutToken   string
	apiURL        string
	allowRemovals bool
	// name is the workspace or cluster a check-* mode checks.
	name string
	// workspace is what check-workspace holds the repo to beyond its name: its namespace (""
	// the workspace's name), Pod Security level ("" restricted) and the platform's extension of
	// the tenant allowlist (platform.yaml spec.tenants.allow), from the namespace, pod-security
	// and allow inputs.
	workspace app.WorkspaceCheck
	// cacheDir keeps the snapshot cache and the incremental baseline between runs (with
	// actions/cache); "" keeps them for the run only.
	cacheDir string
}

// readActionInputs reads the action's inputs from env and masks every credential before
// anything else is printed. The workflow's own token is FLEETBOT_WORKFLOW_TOKEN (action.yml
// sets it from github.token) or GITHUB_TOKEN; the token input is a fan-out token only when
// it differs from it, or when FLEETBOT_FANOUT_TOKEN is set.
func readActionInputs(env *ghaction.Env, cmds *ghaction.Commands) (actionInputs, error) {
	in := actionInputs{mode: env.Input("mode")}
	workflowToken := cmp.Or(env.Getenv("FLEETBOT_WORKFLOW_TOKEN"), env.Getenv("GITHUB_TOKEN"))
	tokenInput := env.Input("token")
	fanout := env.Getenv("FLEETBOT_FANOUT_TOKEN")
	key := env.Input("private-key")
	masked := map[string]bool{"": true}
	for _, s := range []string{workflowToken, tokenInput, fanout, key} {
		if !masked[s] {
			cmds.Mask(s)
			masked[s] = true
		}
	}
	in.token = cmp.Or(tokenInput, workflowToken)
	switch {
	case fanout != "":
		in.fanoutToken = fanout
	case tokenInput != "" && tokenInput != workflowToken:
		in.fanoutToken = tokenInput
	}

	switch in.mode {
	case ModePlan, ModeApply, ModeCheckWorkspace, ModeCheckCluster:
	case "":
		return in, errors.New("input mode is required: plan, apply, check-workspace or check-cluster")
	default:
		return in, fmt.Errorf("input mode %q: want plan, apply, check-workspace or check-cluster", in.mode)
	}

	dir := cmp.Or(env.Input("control-dir"), ".")
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(env.Workspace, dir)
	}
	in.controlDir = filepath.Clean(dir)
	rel, err := filepath.Rel(env.Workspace, in.controlDir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return in, fmt.Errorf("input control-dir %q is outside GITHUB_WORKSPACE %s", env.Input("control-dir"), env.Workspace)
	}
	in.controlRel = filepath.ToSlash(rel)

	if id := env.Input("app-id"); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return in, fmt.Errorf("input app-id %q: want the numeric GitHub App id (the App's settings page, \"App ID\")", id)
		}
		in.appID = n
	}
	if key != "" {
		in.privateKey, err = readPrivateKey(key)
		if err != nil {
			return in, err
		}
	}
	switch {
	case in.appID != 0 && in.privateKey == nil:
		return in, errors.New("input app-id is set but private-key is empty: pass the App's private key, e.g. private-key: ${{ secrets.FLEETBOT_APP_PRIVATE_KEY }}")
	case in.appID == 0 && in.privateKey != nil:
		return in, errors.New("input private-key is set but app-id is empty: pass the App's id, e.g. app-id: ${{ vars.FLEETBOT_APP_ID }}")
	}

	in.apiURL = cmp.Or(env.Input("github-url"), env.APIURL)
	if in.apiURL != "" && !strings.HasSuffix(in.apiURL, "/") {
		in.apiURL += "/"
	}
	if in.allowRemovals, err = env.BoolInput("allow-removals", false); err != nil {
		return in, err
	}
	in.name = env.Input("name")
	in.cacheDir = env.Input("cache-dir")
	if in.workspace, err = workspaceInputs(env); err != nil {
		return in, err
	}
	return in, nil
}

// workspaceInputs reads check-workspace's namespace, pod-security and allow inputs: what the
// control repo says of the workspace, which a workspace repo's CI cannot read (fleetbot serve's
// tenant check reads it from the control repo itself).
func workspaceInputs(env *ghaction.Env) (app.WorkspaceCheck, error) {
	wc := app.WorkspaceCheck{Namespace: env.Input("namespace"), PodSecurity: env.Input("pod-security")}
	switch wc.PodSecurity {
	case "", "restricted", "baseline":
	default:
		return wc, fmt.Errorf("input pod-security %q: a workspace namespace is restricted (the default) or baseline, as spec.podSecurity of the workspace in the control repo says; never privileged", wc.PodSecurity)
	}
	for _, f := range strings.FieldsFunc(env.Input("allow"), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		k, err := app.ParseTenantKind(f)
		if err != nil {
			return wc, fmt.Errorf("input allow: %w", err)
		}
		wc.Allow = append(wc.Allow, k)
	}
	return wc, nil
}

// readPrivateKey takes the private-key input: the PEM itself or, for a runner that keeps
// the key in a file, its path.
func readPrivateKey(v string) ([]byte, error) {
	if strings.Contains(v, "-----BEGIN") {
		return []byte(v), nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, errors.New("input private-key: neither a PEM private key (-----BEGIN ...) nor a readable file")
	}
	return b, nil
}

// hasFanout reports whether the inputs can reach the target repos.
func (in actionInputs) hasFanout() bool { return in.appID != 0 || in.fanoutToken != "" }

// actionRun is one `fleetbot action` run.
type actionRun struct {
	opts Options
	env  *ghaction.Env
	in   actionInputs
	cmds *ghaction.Commands
	log  *slog.Logger
}

// Result is the file plan-json names: everything the step found, for later steps.
type Result struct {
	Mode        string `json:"mode"`
	Event       string `json:"event"`
	Source      string `json:"source,omitempty"`
	Base        string `json:"base,omitempty"`
	PullRequest int    `json:"pullRequest,omitempty"`
	// Valid is false when the control (or target) repo has problems; Issues lists them with
	// paths relative to the repository root.
	Valid  bool       `json:"valid"`
	Issues app.Issues `json:"issues,omitempty"`
	Notes  []string   `json:"notes,omitempty"`
	// Report is the plan or apply against the target repos; Desired the offline plan when
	// the target repos could not be read.
	Report  *report.Document `json:"report,omitempty"`
	Desired *app.DesiredPlan `json:"desired,omitempty"`
	// Review is check control's verdict on a pull request's change.
	Review *app.ReviewReport `json:"review,omitempty"`

	outcome *app.Result // the plan or apply Report is the document of
}

// setOutcome records a plan or an apply (nil: nothing was planned).
func (res *Result) setOutcome(o *app.Result) {
	res.outcome = o
	if o != nil {
		res.Report = o.Document()
	}
}

// PullRequestOutput is one entry of the pull-requests output.
type PullRequestOutput struct {
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	Action string `json:"action"`
}

func (r *actionRun) run(ctx context.Context) error {
	switch r.in.mode {
	case ModePlan:
		return r.plan(ctx)
	case ModeApply:
		return r.apply(ctx)
	case ModeCheckWorkspace:
		return r.checkTarget(kindWorkspace)
	default:
		return r.checkTarget(kindCluster)
	}
}

// event reads the payload; a run without one (a local test) is an empty event.
func (r *actionRun) event() (*ghaction.Event, error) {
	if r.env.EventPath == "" {
		return &ghaction.Event{}, nil
	}
	return r.env.ReadEvent()
}

// load loads the control repo; validation problems come back as res.Issues (annotated),
// anything else as an error.
func (r *actionRun) load(ctx context.Context, res *Result) (*app.Fleet, error) {
	f, err := r.config().Load(ctx, r.in.controlDir)
	if issues, ok := app.ControlProblems(err); ok {
		res.Issues = append(res.Issues, rebase(issues, r.in.controlRel)...)
		return nil, nil
	}
	if err != nil {
		return nil, app.DescribeLoadError(r.in.controlDir, err)
	}
	if f.Repo.Revision == "" {
		f.Repo.Revision = r.env.SHA
	}
	res.Source = f.Repo.Revision
	return f, nil
}

// plan validates the control repo, runs check control on a pull request, plans against the
// target repos read-only, and reports in the job summary and the PR's plan comment. It
// never writes to a target repo.
func (r *actionRun) plan(ctx context.Context) error {
	ev, err := r.event()
	if err != nil {
		return err
	}
	res := &Result{Mode: ModePlan, Event: r.env.EventName, Source: r.env.SHA}
	pull := ev.PullRequest
	if r.env.EventName != ghaction.EventPullRequest && r.env.EventName != ghaction.EventPullRequestTarget {
		pull = nil
	}
	if pull != nil {
		res.PullRequest, res.Base = pull.Number, pull.Base.SHA
	}
	f, err := r.load(ctx, res)
	if err != nil {
		return err
	}
	if pull != nil && f != nil && len(res.Issues) == 0 {
		if err := r.reviewControl(ctx, f, pull, res); err != nil {
			return err
		}
	}
	var planErr error
	if f != nil && len(res.Issues) == 0 {
		planErr = r.planTargets(ctx, f, res)
	}
	res.Valid = len(res.Issues) == 0
	r.annotate(res.Issues)

	body := r.planMarkdown(res, pull)
	if err := r.finish(res, body); err != nil {
		return err
	}
	if pull != nil {
		r.comment(ctx, pull.Number, body)
	}
	if planErr != nil {
		return planErr
	}
	if !res.Valid {
		fmt.Fprintf(r.opts.Stderr, "fleetbot: %d problem(s); see the annotations and the job summary\n", len(res.Issues))
		return app.ExitCode(report.ClassInvalidInput.ExitCode())
	}
	return nil
}

// planTargets plans against the target repos through a read-only forge, or, without
// credentials that reach them, records the desired state and says why.
func (r *actionRun) planTargets(ctx context.Context, f *app.Fleet, res *Result) error {
	if !r.in.hasFanout() {
		d, err := app.BuildDesiredPlan(f)
		if err != nil {
			return err
		}
		res.Desired = &d
		res.Notes = append(res.Notes, "The target repos were not read: GITHUB_TOKEN can only read "+r.env.Repository+
			". Set app-id and private-key (see docs/action.md) to see what would change in each repo.")
		return nil
	}
	runner, err := r.openRunner(ctx, f.Owner(), true)
	if err != nil {
		return err
	}
	defer runner.Close()
	out, err := runner.Run(ctx, f, app.Request{Mode: app.ModePlan, Trigger: app.TriggerCheck, AllowRemovals: r.in.allowRemovals})
	if issues, ok := app.ControlProblems(err); ok {
		// Found against the org (a team that does not exist): nothing was planned.
		res.Issues = append(res.Issues, rebase(issues, r.in.controlRel)...)
		return nil
	}
	res.setOutcome(out)
	r.logReport(res.Report)
	return err
}

// apply reconciles every target repo on a push to the default branch (or a manual or
// scheduled run). It refuses to start with only the workflow's GITHUB_TOKEN.
func (r *actionRun) apply(ctx context.Context) error {
	ev, err := r.event()
	if err != nil {
		return err
	}
	res := &Result{Mode: ModeApply, Event: r.env.EventName, Source: r.env.SHA}
	switch r.env.EventName {
	case ghaction.EventPush:
		def := ""
		if ev.Repository != nil {
			def = ev.Repository.DefaultBranch
		}
		if def != "" && r.env.Ref != "refs/heads/"+def {
			r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelNotice, Title: "fleetbot",
				Message: fmt.Sprintf("apply skipped: %s is not the default branch %s", r.env.Ref, def)})
			res.Valid = true
			res.Notes = append(res.Notes, "Skipped: "+r.env.Ref+" is not the default branch.")
			return r.finish(res, r.applyMarkdown(res))
		}
	case ghaction.EventWorkflowDispatch, ghaction.EventSchedule:
	default:
		return fmt.Errorf("mode apply runs on push to the default branch, workflow_dispatch or schedule, not on %s (use mode plan for pull requests)", r.env.EventName)
	}
	if !r.in.hasFanout() {
		return fmt.Errorf("apply fans out to other repos; GITHUB_TOKEN can only write to %s. Set app-id and private-key (see docs/action.md)", r.env.Repository)
	}
	f, err := r.load(ctx, res)
	if err != nil {
		return err
	}
	var runErr error
	if f != nil {
		runErr = r.applyTargets(ctx, f, res)
	}
	res.Valid = len(res.Issues) == 0
	r.annotate(res.Issues)
	if res.outcome != nil {
		r.annotateRepos(res.Report)
		r.logReport(res.Report)
	}
	if err := r.finish(res, r.applyMarkdown(res)); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if !res.Valid {
		fmt.Fprintf(r.opts.Stderr, "fleetbot: %d problem(s), nothing was written; see the annotations and the job summary\n", len(res.Issues))
		return app.ExitCode(report.ClassInvalidInput.ExitCode())
	}
	return nil
}

func (r *actionRun) applyTargets(ctx context.Context, f *app.Fleet, res *Result) error {
	runner, err := r.openRunner(ctx, f.Owner(), false)
	if err != nil {
		return err
	}
	defer runner.Close()
	// With a cache kept between runs (actions/cache), the Runner keeps baselines: a push plans
	// only the target repos whose desired state changed; scheduled and manual runs plan every
	// repo.
	trigger := app.TriggerResync
	if r.env.EventName == ghaction.EventPush {
		trigger = app.TriggerPush
	}
	out, err := runner.Run(ctx, f, app.Request{Mode: app.ModeApply, Trigger: trigger, AllowRemovals: r.in.allowRemovals,
		Step: (&stepLog{w: r.opts.Stdout}).step})
	if issues, ok := app.ControlProblems(err); ok {
		// Found against the org (a team that does not exist): nothing was planned.
		res.Issues = append(res.Issues, rebase(issues, r.in.controlRel)...)
		return nil
	}
	res.setOutcome(out)
	return err
}

// checkTarget checks the workspace or cluster repo checked out at GITHUB_WORKSPACE.
func (r *actionRun) checkTarget(kind string) error {
	name := r.in.name
	if name == "" {
		name = strings.TrimPrefix(r.env.Repo(), kind+"-")
	}
	res := &Result{Mode: r.in.mode, Event: r.env.EventName, Source: r.env.SHA}
	issues, err := checkTargetRepo(kind, r.env.Workspace, name, r.in.workspace)
	if err != nil {
		return fmt.Errorf("checking %s repo %s: %w", kind, name, err)
	}
	res.Issues = issues
	res.Valid = len(res.Issues) == 0
	r.annotate(res.Issues)
	var b strings.Builder
	fmt.Fprintf(&b, "## fleetbot %s `%s`\n\n", r.in.mode, r.env.Repository)
	if res.Valid {
		fmt.Fprintf(&b, "✅ No problems in %s repo `%s`.\n", kind, name)
	} else {
		r.writeIssues(&b, res.Issues)
	}
	if err := r.finish(res, b.String()); err != nil {
		return err
	}
	if !res.Valid {
		fmt.Fprintf(r.opts.Stderr, "fleetbot: %d problem(s); see the annotations and the job summary\n", len(res.Issues))
		return app.ExitCode(report.ClassInvalidInput.ExitCode())
	}
	return nil
}

// openRunner opens the GitHub forge of the target repos of owner with the fan-out
// credentials (the App's installation on owner, or the fan-out token) and returns the
// application's Runner on it.
func (r *actionRun) openRunner(ctx context.Context, owner string, readOnly bool) (*app.Runner, error) {
	t, err := r.config().OpenRunner(ctx, owner, readOnly)
	if err != nil {
		return nil, fmt.Errorf("connecting to GitHub for the target repos of %s: %w", owner, err)
	}
	return t, nil
}

// cacheDir is the snapshot cache of the target repos: a job starts on a fresh runner, so the
// cache only lives as long as the run ("") unless --github-cache names a directory (kept with
// actions/cache).
func (r *actionRun) cacheDir() string {
	d := cmp.Or(r.in.cacheDir, r.opts.CacheDir)
	if d == "off" || d == "none" {
		return ""
	}
	return d
}

// config is the run's application configuration for the target repos: the API URL of the
// inputs, the App's installation on the platform owner or the fan-out token, the write budget
// of the flags, the Git URL of that GitHub host, as the CLI and serve resolve them.
func (r *actionRun) config() app.Config {
	cfg := app.Config{
		Forge:    app.ForgeGitHub,
		GitURL:   app.ResolveGitURL(r.opts.GitURL, app.ForgeGitHub, r.in.apiURL),
		CacheDir: r.cacheDir(), Logger: r.log, Stats: r.opts.Stderr, Version: r.opts.Version,
	}
	cfg.GitHub.APIURL, cfg.GitHub.Budget = r.in.apiURL, r.opts.Budget
	if r.in.appID != 0 {
		cfg.GitHub.AppID, cfg.GitHub.PrivateKey = r.in.appID, r.in.privateKey
	} else {
		cfg.GitHub.Token = r.in.fanoutToken
	}
	return cfg
}

// comment creates or edits the plan comment on the control repo's pull request with the
// workflow's token. A failure (a fork's read-only token) is a warning: the summary has it all.
func (r *actionRun) comment(ctx context.Context, number int, body string) {
	warn := func(err error) {
		r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelWarning, Title: "fleetbot",
			Message: "could not write the plan comment (the job summary has the plan): " + err.Error()})
	}
	if r.in.token == "" {
		warn(errors.New("no token: set the token input (default github.token)"))
		return
	}
	workflow := app.Config{Logger: r.log}
	workflow.GitHub.APIURL, workflow.GitHub.Token = r.in.apiURL, r.in.token
	c, err := workflow.GitHubClient(ctx, r.env.Owner(), false)
	if err != nil {
		warn(err)
		return
	}
	body = ghaction.Truncate(body, maxCommentBytes, "\n\n_… cut to fit GitHub's comment limit; the job summary and plan-json have the rest._\n")
	if _, err := upsertComment(ctx, c.API(), r.env.Owner(), r.env.Repo(), number, body); err != nil {
		warn(err)
	}
}

// upsertComment edits the first comment on issue or pull request number whose body starts
// with PlanMarker, or creates one; it writes nothing when the comment already says body. It
// returns the comment's id.
func upsertComment(ctx context.Context, api *gh.Client, owner, repo string, number int, body string) (int64, error) {
	full := owner + "/" + repo
	var id int64
	found := false
	err := ghforge.EachPage(func(o gh.ListOptions) ([]*gh.IssueComment, *gh.Response, error) {
		cs, resp, err := api.Issues.ListComments(ctx, owner, repo, number, &gh.IssueListCommentsOptions{ListOptions: o})
		return cs, resp, ghforge.Wrap(err, fmt.Sprintf("listing comments of #%d in", number), full)
	}, func(cs []*gh.IssueComment) (bool, error) {
		for _, c := range cs {
			if !strings.HasPrefix(c.GetBody(), PlanMarker) {
				continue
			}
			id, found = c.GetID(), true
			if c.GetBody() == body {
				return true, nil
			}
			_, _, err := api.Issues.EditComment(ctx, owner, repo, c.GetID(), &gh.IssueComment{Body: gh.String(body)})
			return true, ghforge.Wrap(err, fmt.Sprintf("editing comment %d on #%d in", c.GetID(), number), full)
		}
		return false, nil
	})
	if err != nil || found {
		return id, err
	}
	c, _, err := api.Issues.CreateComment(ctx, owner, repo, number, &gh.IssueComment{Body: gh.String(body)})
	if err != nil {
		return 0, ghforge.Wrap(err, fmt.Sprintf("commenting on #%d in", number), full)
	}
	return c.GetID(), nil
}

// finish writes plan-json, the step outputs and the job summary.
func (r *actionRun) finish(res *Result, summary string) error {
	planPath := r.planJSONPath()
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(planPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing plan-json: %w", err)
	}
	changed, pulls, blocked := []string{}, []PullRequestOutput{}, []string{}
	code := report.ExitDone
	if !res.Valid {
		code = report.ClassInvalidInput.ExitCode()
	}
	if res.outcome != nil {
		for _, x := range res.outcome.Blocked() {
			blocked = append(blocked, x.Repo)
		}
		if res.Valid {
			code = res.outcome.ExitCode(res.Mode == ModeApply)
		}
		for _, x := range res.outcome.Results {
			if !x.Changed() {
				continue
			}
			changed = append(changed, x.Repo)
			if x.PR > 0 {
				pulls = append(pulls, PullRequestOutput{Repo: x.Repo, Number: x.PR, URL: x.PRURL, Action: string(x.Action)})
			}
		}
	}
	changedJSON, err := json.Marshal(changed)
	if err != nil {
		return err
	}
	pullsJSON, err := json.Marshal(pulls)
	if err != nil {
		return err
	}
	blockedJSON, err := json.Marshal(blocked)
	if err != nil {
		return err
	}
	outputs := []struct{ name, value string }{
		{outputChangedRepos, string(changedJSON)},
		{outputPullRequests, string(pullsJSON)},
		{outputPlanJSON, planPath},
		{outputBlockedRepos, string(blockedJSON)},
		{outputExitCode, strconv.Itoa(code)},
	}
	if r.env.Output == "" {
		r.log.Warn("GITHUB_OUTPUT not set; step outputs not written")
	} else {
		for _, o := range outputs {
			if err := ghaction.SetOutput(r.env.Output, o.name, o.value); err != nil {
				return err
			}
		}
	}
	r.cmds.Overflow("the job summary")
	if r.env.StepSummary == "" {
		_, err := io.WriteString(r.opts.Stdout, summary)
		return err
	}
	return ghaction.AppendSummary(r.env.StepSummary, summary)
}

// planJSONPath is the file plan-json names: RUNNER_TEMP/fleetbot-plan.json.
func (r *actionRun) planJSONPath() string {
	dir := r.env.RunnerTemp
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, PlanJSONName)
}

// logView is how the log and the job summary show a report at scale: at most rows repos, then
// where every repo is.
func (r *actionRun) logView(rows int) report.View {
	return report.View{Limit: rows, Rest: "the plan-json output (" + r.planJSONPath() + "; keep it with actions/upload-artifact)"}
}

// logReport writes a plan or apply report to the step's log as the CLI prints it: the repos
// that change or need a look (at most logRows, the most urgent first, then how many more), the
// others counted in one line, each warning once with how many repos have it, and last the
// summary line with the counts by action.
func (r *actionRun) logReport(d *report.Document) {
	if d == nil {
		return
	}
	_ = d.WriteTextView(r.opts.Stdout, r.logView(logRows))
}

// annotateRepos annotates each deferred (a warning) and failed (an error) repo; past GitHub's
// ten of a level, Commands counts the rest in one annotation (finish).
func (r *actionRun) annotateRepos(d *report.Document) {
	for _, x := range d.Repos {
		switch {
		case x.Outcome.Class == report.ClassDeferred:
			r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelWarning, Title: "fleetbot", Message: x.Line()})
		case x.Action == report.ActionFailed || (x.Error != nil && x.Action != report.ActionDeferred):
			r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelError, Title: "fleetbot", Message: x.Line()})
		}
	}
	r.cmds.Overflow("the job summary")
}

// stepLog writes a run's progress to the step's log, bounded: a line as each phase reaches a
// tenth of its repos (a phase of fewer than ten repos: when it is done), so a run of a thousand
// repos logs about thirty lines, not a thousand; the runner stamps each line's time.
type stepLog struct {
	w     io.Writer
	mu    sync.Mutex
	phase string
	tenth int
}

func (s *stepLog) step(phase string, done, total int) {
	if total <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if phase != s.phase {
		s.phase, s.tenth = phase, 0
	}
	tenth := done * 10 / total
	if tenth <= s.tenth || (total < 10 && done < total) {
		return
	}
	s.tenth = tenth
	verb := map[string]string{"read": "read", "plan": "planned", "apply": "applied"}[phase]
	if verb == "" {
		verb = phase
	}
	fmt.Fprintf(s.w, "fleetbot: %s %d of %d repos\n", verb, done, total)
}

// annotate writes one error annotation per issue, on its file and line.
func (r *actionRun) annotate(issues app.Issues) {
	for _, i := range issues {
		msg := i.Message
		if i.Hint != "" {
			msg += "\nhint: " + i.Hint
		}
		r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelError, File: i.Pos.File, Line: i.Pos.Line, Title: "fleetbot", Message: msg})
	}
}

// rebase makes issue positions relative to the repository root instead of dir (the control
// dir relative to GITHUB_WORKSPACE), as annotations need.
func rebase(issues app.Issues, dir string) app.Issues {
	out := make(app.Issues, 0, len(issues))
	for _, i := range issues {
		if i.Pos.File != "" && dir != "." && dir != "" {
			i.Pos.File = path.Join(dir, i.Pos.File)
		}
		out = append(out, i)
	}
	return out
}

func login(a *ghaction.Account) string {
	if a == nil {
		return ""
	}
	return a.Login
}

// planMarkdown is the plan as markdown, for the job summary and the PR comment.
func (r *actionRun) planMarkdown(res *Result, pull *ghaction.PullRequest) string {
	var b strings.Builder
	b.WriteString(PlanMarker + "\n")
	if res.Valid {
		b.WriteString("## fleetbot plan: ✅ valid\n\n")
	} else {
		fmt.Fprintf(&b, "## fleetbot plan: ❌ %d problem(s)\n\n", len(res.Issues))
	}
	if pull != nil {
		fmt.Fprintf(&b, "Control repo `%s` at `%s` (#%d merged into `%s` at `%s`).\n\n",
			r.env.Repository, short(res.Source), pull.Number, pull.Base.Ref, short(pull.Base.SHA))
	} else {
		fmt.Fprintf(&b, "Control repo `%s` at `%s`.\n\n", r.env.Repository, short(res.Source))
	}
	if !res.Valid {
		r.writeIssues(&b, res.Issues)
		b.WriteString("\nNothing was planned: fix these and push again.\n")
	}
	if res.Review != nil {
		_ = res.Review.WriteMarkdown(&b)
		b.WriteString("\n")
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "> [!NOTE]\n> %s\n\n", n)
	}
	switch {
	case res.Report != nil:
		_ = res.Report.WriteMarkdownView(&b, r.logView(summaryRows))
	case res.Desired != nil:
		r.writeDesiredMarkdown(&b, *res.Desired)
	}
	r.footer(&b)
	return b.String()
}

// applyMarkdown is the apply report as markdown, for the job summary.
func (r *actionRun) applyMarkdown(res *Result) string {
	var b strings.Builder
	switch {
	case !res.Valid:
		fmt.Fprintf(&b, "## fleetbot apply: ❌ %d problem(s), nothing written\n\n", len(res.Issues))
		r.writeIssues(&b, res.Issues)
	case res.outcome != nil && len(res.outcome.Failed()) > 0:
		fmt.Fprintf(&b, "## fleetbot apply: ⚠️ %d repo(s) failed\n\n", len(res.outcome.Failed()))
	default:
		b.WriteString("## fleetbot apply\n\n")
	}
	fmt.Fprintf(&b, "Control repo `%s` at `%s`.\n\n", r.env.Repository, short(res.Source))
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "> [!NOTE]\n> %s\n\n", n)
	}
	if res.Report != nil {
		_ = res.Report.WriteMarkdownView(&b, r.logView(summaryRows))
	}
	r.footer(&b)
	return b.String()
}

func (r *actionRun) footer(b *strings.Builder) {
	if r.env.RunID != "" && r.env.ServerURL != "" {
		fmt.Fprintf(b, "\n<sub>fleetbot %s, [run %s](%s/%s/actions/runs/%s)</sub>\n", r.opts.Version, r.env.RunID,
			strings.TrimSuffix(r.env.ServerURL, "/"), r.env.Repository, r.env.RunID)
	}
}

// writeIssues writes the problems as a table, at most summaryRows of them, then how many more
// and where they all are.
func (r *actionRun) writeIssues(b *strings.Builder, issues app.Issues) {
	b.WriteString("| file | problem | hint |\n|---|---|---|\n")
	for _, i := range issues[:min(len(issues), summaryRows)] {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", i.Pos.String(), mdCell(i.Message), mdCell(i.Hint))
	}
	if more := len(issues) - summaryRows; more > 0 {
		fmt.Fprintf(b, "\nand %d more problem(s): %s lists every one.\n", more, mdCell(r.logView(0).Rest))
	}
}

// writeDesiredMarkdown writes the desired state of each target repo, at most summaryRows of
// them, then how many more and where they all are.
func (r *actionRun) writeDesiredMarkdown(b *strings.Builder, p app.DesiredPlan) {
	b.WriteString("### Desired state\n\n")
	fmt.Fprintf(b, "%d target repos.\n\n", len(p.Repos))
	b.WriteString("| repo | kind | files | objects | access |\n|---|---|---|---|---|\n")
	for _, d := range p.Repos[:min(len(p.Repos), summaryRows)] {
		fmt.Fprintf(b, "| `%s` | %s | %d managed, %d scaffold | %s | %s |\n", d.Repo, d.Kind,
			len(d.Files), len(d.Scaffolds), mdCell(d.ObjectCounts()), mdCell(app.FormatTeams(d.Teams)))
	}
	if more := len(p.Repos) - summaryRows; more > 0 {
		fmt.Fprintf(b, "\nand %d more target repos: %s lists every one.\n", more, mdCell(r.logView(0).Rest))
	}
}

func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func short(sha string) string {
	if sha == "" {
		return "working tree"
	}
	return report.ShortSHA(sha)
}

// reviewControl runs check control on the pull request: the change from the base to the
// checked-out merge commit, read from the clone's git objects, judged against the persona
// rules with the author's teams (looked up as the App; unknown without it). A clone without
// the base commit (actions/checkout's default depth of 1) skips the review with a note.
func (r *actionRun) reviewControl(ctx context.Context, f *app.Fleet, pull *ghaction.PullRequest, res *Result) error {
	skip := func(why string) error {
		res.Notes = append(res.Notes, "check control skipped: "+why)
		return nil
	}
	repo, err := workcopy.Open(r.in.controlDir)
	if err != nil {
		return skip("the control repo checkout is not a git clone")
	}
	head := cmp.Or(r.env.SHA, "HEAD")
	base := pull.Base.SHA
	// The merge commit's first parent is the base GitHub merged the PR into.
	if parent, ok := workcopy.MergeParent(repo, head); ok {
		base = parent
	}
	baseFS, baseRev, err := workcopy.TreeFS(repo, base)
	if err != nil {
		return skip(fmt.Sprintf("the base commit %s is not in the clone; check out with fetch-depth: 2", short(base)))
	}
	headFS, headRev, err := workcopy.TreeFS(repo, head)
	if err != nil {
		return skip(fmt.Sprintf("the head commit %s is not in the clone", short(head)))
	}
	if baseFS, headFS, err = workcopy.SubTrees(repo, r.in.controlDir, baseFS, headFS); err != nil {
		return err
	}
	in := app.ControlChange{Base: baseFS, Head: headFS, BaseRev: baseRev, HeadRev: headRev, Author: login(pull.User)}
	if r.in.hasFanout() && in.Author != "" {
		owner := f.Repo.Platform.Spec.Owner
		c, err := r.config().GitHubClient(ctx, owner, true)
		if err != nil {
			return fmt.Errorf("connecting to GitHub for the teams of %s: %w", owner, err)
		}
		in.Member = func(slug string) (bool, error) { return c.TeamMember(ctx, owner, slug, in.Author) }
	}
	rep, err := r.config().CheckControl(in)
	if err != nil {
		return fmt.Errorf("check control: %w", err)
	}
	res.Review = rep.Report()
	res.Issues = append(res.Issues, rebase(rep.Issues(), r.in.controlRel)...)
	if rep.NeedsPlatformAdmin() {
		r.cmds.Annotate(ghaction.Annotation{Level: ghaction.LevelNotice, Title: "fleetbot check control",
			Message: "this change needs a platform admin's review: " + strings.Join(rep.Reasons(), "; ")})
	}
	return nil
}

// The target repo kinds the check modes name, as in their repos' names (workspace-NAME,
// cluster-NAME).
const (
	kindWorkspace = "workspace"
	kindCluster   = "cluster"
)

// checkTargetRepo is check workspace / check cluster on the checkout at dir: it renders the
// human-owned kustomizations offline and returns the problems as issues on file and line.
// A workspace's objects must stay in its namespace (wc's, else its name), at its Pod Security
// level, within the tenant allowlist as the platform extends it.
func checkTargetRepo(kind, dir, name string, wc app.WorkspaceCheck) (app.Issues, error) {
	check := app.CheckClusterRepo
	if kind == kindWorkspace {
		wc.Workspace = name
		check = func(dir string) ([]string, []report.Problem, error) { return app.CheckWorkspaceRepoWith(dir, wc) }
	}
	entries, problems, err := check(dir)
	if err != nil {
		return nil, err
	}
	var issues app.Issues
	switch {
	case len(entries) == 0 && kind == kindWorkspace:
		issues.Add(app.Position{File: "clusters"}, "run check-workspace in a workspace repo, or set mode check-cluster",
			"no clusters/<cluster>/kustomization.yaml: this is not a workspace repo")
	case len(entries) == 0:
		issues.Add(app.Position{File: "apps/kustomization.yaml"}, "run check-cluster in a cluster repo, or set mode check-workspace",
			"no apps/kustomization.yaml: this is not a cluster repo")
	}
	for _, p := range problems {
		msg := p.Message
		if p.Object != "" {
			msg = p.Object + ": " + msg
		}
		issues = append(issues, app.Issue{Pos: app.Position{File: p.File, Line: p.Line}, Message: msg, Hint: p.Hint})
	}
	return issues, nil
}
