// Package ghaction is fleetbot's side of the GitHub Actions runner protocol: it reads the
// runner's environment and event payload, and writes what a step hands back to the runner —
// outputs (GITHUB_OUTPUT), the job summary (GITHUB_STEP_SUMMARY), annotations and secret masks
// (workflow commands on stdout).
//
// It is pure: the environment comes in as a lookup function and every writer takes an
// io.Writer or a path, so the package is tested with plain values and knows nothing of
// fleetbot's control repo or of GitHub's REST API. See
// https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands and
// https://docs.github.com/en/actions/reference/workflows-and-actions/variables.
package ghaction

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Events fleetbot's action handles.
const (
	EventPullRequest       = "pull_request"
	EventPullRequestTarget = "pull_request_target"
	EventPush              = "push"
	EventWorkflowDispatch  = "workflow_dispatch"
	EventSchedule          = "schedule"
)

// Env is what a step knows from the runner's default environment variables.
type Env struct {
	// EventName is GITHUB_EVENT_NAME: pull_request, push, workflow_dispatch, ...
	EventName string
	// EventPath is GITHUB_EVENT_PATH, the JSON payload of the event that started the run.
	EventPath string
	// Repository is GITHUB_REPOSITORY, "owner/repo" of the workflow.
	Repository string
	// SHA is GITHUB_SHA: for pull_request the merge commit that is checked out, for push the
	// pushed commit.
	SHA string
	// Ref is GITHUB_REF, e.g. refs/heads/main or refs/pull/7/merge.
	Ref string
	// APIURL is GITHUB_API_URL (https://api.github.com, or https://HOST/api/v3 on GHES).
	APIURL string
	// ServerURL is GITHUB_SERVER_URL (https://github.com), for links.
	ServerURL string
	// Workspace is GITHUB_WORKSPACE, where actions/checkout put the repository.
	Workspace string
	// Output is GITHUB_OUTPUT and StepSummary GITHUB_STEP_SUMMARY: files the step appends to.
	Output      string
	StepSummary string
	// RunnerTemp is RUNNER_TEMP, a directory emptied after each job ("" outside a runner).
	RunnerTemp string
	// RunID is GITHUB_RUN_ID, for links to the run.
	RunID string

	getenv func(string) string
}

// ErrNotRunner means a variable every runner sets is missing: the command is not running in
// a GitHub Actions step.
var ErrNotRunner = errors.New("not running in a GitHub Actions step")

// FromEnv reads the runner's variables through getenv (os.Getenv in a program). It fails
// with ErrNotRunner, naming the variables, when GITHUB_EVENT_NAME, GITHUB_REPOSITORY or
// GITHUB_WORKSPACE is missing.
func FromEnv(getenv func(string) string) (*Env, error) {
	e := &Env{
		EventName:   getenv("GITHUB_EVENT_NAME"),
		EventPath:   getenv("GITHUB_EVENT_PATH"),
		Repository:  getenv("GITHUB_REPOSITORY"),
		SHA:         getenv("GITHUB_SHA"),
		Ref:         getenv("GITHUB_REF"),
		APIURL:      getenv("GITHUB_API_URL"),
		ServerURL:   getenv("GITHUB_SERVER_URL"),
		Workspace:   getenv("GITHUB_WORKSPACE"),
		Output:      getenv("GITHUB_OUTPUT"),
		StepSummary: getenv("GITHUB_STEP_SUMMARY"),
		RunnerTemp:  getenv("RUNNER_TEMP"),
		RunID:       getenv("GITHUB_RUN_ID"),
		getenv:      getenv,
	}
	var missing []string
	for _, v := range []struct{ name, val string }{
		{"GITHUB_EVENT_NAME", e.EventName}, {"GITHUB_REPOSITORY", e.Repository}, {"GITHUB_WORKSPACE", e.Workspace},
	} {
		if v.val == "" {
			missing = append(missing, v.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s not set", ErrNotRunner, strings.Join(missing, ", "))
	}
	if _, _, ok := strings.Cut(e.Repository, "/"); !ok {
		return nil, fmt.Errorf("GITHUB_REPOSITORY %q: want owner/repo", e.Repository)
	}
	return e, nil
}

// Owner is the owner part of Repository.
func (e *Env) Owner() string { o, _, _ := strings.Cut(e.Repository, "/"); return o }

// Repo is the name part of Repository.
func (e *Env) Repo() string { _, r, _ := strings.Cut(e.Repository, "/"); return r }

// Getenv reads any other variable through the same lookup as FromEnv.
func (e *Env) Getenv(name string) string { return e.getenv(name) }

// Input returns the action input name, trimmed of surrounding white space. The runner passes
// inputs of Docker and JavaScript actions as INPUT_<NAME> with the name upper-cased and
// spaces replaced by underscores (hyphens kept); a composite action sets them itself, and
// shells cannot export names with hyphens, so INPUT_<NAME> with hyphens as underscores is
// read too.
func (e *Env) Input(name string) string {
	up := strings.ToUpper(strings.ReplaceAll(name, " ", "_"))
	if v := e.getenv("INPUT_" + up); v != "" {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(e.getenv("INPUT_" + strings.ReplaceAll(up, "-", "_")))
}

// BoolInput parses a boolean input as the Actions toolkit does (YAML 1.2 core schema: true,
// True, TRUE, false, False, FALSE); empty is def.
func (e *Env) BoolInput(name string, def bool) (bool, error) {
	switch v := e.Input(name); v {
	case "":
		return def, nil
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	default:
		return false, fmt.Errorf("input %s: %q is not a boolean (true or false)", name, v)
	}
}

// Event is the part of an event payload fleetbot reads: the pull request of a pull_request
// event, or the ref and commits of a push. Unknown fields are ignored.
type Event struct {
	Action string `json:"action"`
	// Number is the pull request number (pull_request events).
	Number      int          `json:"number"`
	PullRequest *PullRequest `json:"pull_request"`
	// Ref, Before and After describe a push.
	Ref        string      `json:"ref"`
	Before     string      `json:"before"`
	After      string      `json:"after"`
	Repository *Repository `json:"repository"`
	Sender     *Account    `json:"sender"`
}

// PullRequest is a pull request in an event payload.
type PullRequest struct {
	Number  int      `json:"number"`
	HTMLURL string   `json:"html_url"`
	User    *Account `json:"user"`
	Base    Branch   `json:"base"`
	Head    Branch   `json:"head"`
}

// Branch is one side of a pull request.
type Branch struct {
	Ref  string      `json:"ref"`
	SHA  string      `json:"sha"`
	Repo *Repository `json:"repo"`
}

// Repository is a repository in an event payload.
type Repository struct {
	FullName      string `json:"full_name"`
	DefaultBranch string `json:"default_branch"`
}

// Account is a user or bot in an event payload.
type Account struct {
	Login string `json:"login"`
}

// ReadEvent decodes the payload at EventPath.
func (e *Env) ReadEvent() (*Event, error) {
	if e.EventPath == "" {
		return nil, fmt.Errorf("%w: GITHUB_EVENT_PATH not set", ErrNotRunner)
	}
	b, err := os.ReadFile(e.EventPath)
	if err != nil {
		return nil, fmt.Errorf("reading the event payload: %w", err)
	}
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("decoding the %s event payload %s: %w", e.EventName, e.EventPath, err)
	}
	return &ev, nil
}

// FromFork reports whether a pull request comes from another repository, whose runs get a
// read-only token and no secrets.
func (p *PullRequest) FromFork() bool {
	return p.Head.Repo != nil && p.Base.Repo != nil && !strings.EqualFold(p.Head.Repo.FullName, p.Base.Repo.FullName)
}
