package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/fleetbot-io/fleetbot/internal/action"
)

// actionMetadata is the action metadata syntax
// (https://docs.github.com/en/actions/reference/workflows-and-actions/metadata-syntax) as the
// runner's template schema (actions/runner src/Runner.Worker/action_yaml.json) defines it for
// a composite action; decoding it strictly rejects any key the runner does not know.
type actionMetadata struct {
	Name        string                  `yaml:"name"`
	Author      string                  `yaml:"author"`
	Description string                  `yaml:"description"`
	Inputs      map[string]actionInput  `yaml:"inputs"`
	Outputs     map[string]actionOutput `yaml:"outputs"`
	Runs        struct {
		Using string       `yaml:"using"`
		Steps []actionStep `yaml:"steps"`
	} `yaml:"runs"`
	Branding struct {
		Icon  string `yaml:"icon"`
		Color string `yaml:"color"`
	} `yaml:"branding"`
}

type actionInput struct {
	Description        string  `yaml:"description"`
	Required           *bool   `yaml:"required"`
	Default            *string `yaml:"default"`
	DeprecationMessage string  `yaml:"deprecationMessage"`
}

type actionOutput struct {
	Description string `yaml:"description"`
	Value       string `yaml:"value"`
}

type actionStep struct {
	Name             string            `yaml:"name"`
	ID               string            `yaml:"id"`
	If               string            `yaml:"if"`
	Run              string            `yaml:"run"`
	Shell            string            `yaml:"shell"`
	WorkingDirectory string            `yaml:"working-directory"`
	Uses             string            `yaml:"uses"`
	With             map[string]string `yaml:"with"`
	Env              map[string]string `yaml:"env"`
	ContinueOnError  string            `yaml:"continue-on-error"`
}

// expression finds ${{ ... }} expressions; contextRef the contexts they name.
var (
	expression = regexp.MustCompile(`\$\{\{(.*?)\}\}`)
	contextRef = regexp.MustCompile(`(?:^|[^\w.-])([a-z_]+)\.([\w-]+)(?:\.([\w-]+))?`)
)

// Contexts each place of a composite action may use (action_yaml.json); never secrets or
// vars: the caller passes those in through inputs.
var (
	inputDefaultContexts = []string{"github", "strategy", "matrix", "job", "runner"}
	outputValueContexts  = []string{"github", "strategy", "matrix", "steps", "inputs", "job", "runner", "env"}
	stepContexts         = outputValueContexts
)

// ref is one context reference in action.yml, and where it is.
type ref struct {
	where, context, name, field string
}

func refs(where, s string) []ref {
	var out []ref
	for _, e := range expression.FindAllStringSubmatch(s, -1) {
		for _, m := range contextRef.FindAllStringSubmatch(e[1], -1) {
			out = append(out, ref{where: where, context: m[1], name: m[2], field: m[3]})
		}
	}
	return out
}

func loadActionMetadata(t *testing.T) (actionMetadata, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "action.yml"))
	require.NoError(t, err)
	var md actionMetadata
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&md), "action.yml has only keys the runner knows")
	return md, b
}

// setupInputs are the inputs action.yml's own steps read to install fleetbot (which binary
// runs); fleetbot action does not read them.
var setupInputs = []string{"build-from-source"}

func TestActionMetadata(t *testing.T) {
	t.Parallel()
	md, _ := loadActionMetadata(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "action.md"))
	require.NoError(t, err)
	assert.NotEmpty(t, md.Name, "name")
	assert.NotEmpty(t, md.Description, "description")
	require.Equal(t, "composite", md.Runs.Using, "runs.using (docs/action.md says why)")
	require.NotEmpty(t, md.Runs.Steps)

	// Inputs: each described here and in docs/action.md; required ones without a default;
	// exactly what fleetbot reads.
	var names []string
	for name, in := range md.Inputs {
		names = append(names, name)
		assert.NotEmpty(t, strings.TrimSpace(in.Description), "input %s has a description", name)
		assert.Regexp(t, `^[a-z][a-z0-9-]*$`, name, "input name")
		if in.Required != nil && *in.Required {
			assert.Nil(t, in.Default, "required input %s has no default", name)
		}
		assert.Contains(t, string(doc), "| `"+name+"` |", "docs/action.md documents input %s", name)
	}
	sort.Strings(names)
	want := append(action.InputNames(), setupInputs...)
	sort.Strings(want)
	assert.Equal(t, want, names, "action.yml inputs are the inputs fleetbot action reads, and the install step's")

	var all []ref
	for name, in := range md.Inputs {
		if in.Default != nil {
			for _, r := range refs("inputs."+name+".default", *in.Default) {
				assert.Contains(t, inputDefaultContexts, r.context, "%s may not use %s", r.where, r.context)
				all = append(all, r)
			}
		}
	}

	// Steps: run steps have a shell; uses steps nothing of a run step; ids unique.
	ids := map[string]bool{}
	for i, s := range md.Runs.Steps {
		where := "runs.steps[" + s.Name + "]"
		switch {
		case s.Run != "":
			assert.Empty(t, s.Uses, "%s: run and uses", where)
			assert.NotEmpty(t, s.Shell, "%s: a composite run step needs shell", where)
		case s.Uses != "":
			assert.Empty(t, s.Shell+s.WorkingDirectory, "%s: shell and working-directory are for run steps", where)
			assert.Regexp(t, `^[\w.-]+/[\w.-]+(/[\w./-]+)?@\S+$`, s.Uses, "%s: uses owner/repo@ref", where)
		default:
			t.Errorf("step %d has neither run nor uses", i)
		}
		if s.ID != "" {
			assert.False(t, ids[s.ID], "step id %s is unique", s.ID)
			ids[s.ID] = true
		}
		fields := []string{s.Name, s.If, s.Run, s.WorkingDirectory, s.ContinueOnError}
		for _, v := range s.With {
			fields = append(fields, v)
		}
		for _, v := range s.Env {
			fields = append(fields, v)
		}
		for _, f := range fields {
			for _, r := range refs(where, f) {
				assert.Contains(t, stepContexts, r.context, "%s may not use %s", r.where, r.context)
				all = append(all, r)
			}
		}
		// Expressions inside a script are template injection; pass them through env.
		assert.Empty(t, expression.FindAllString(s.Run, -1), "%s: run uses no ${{ }}", where)
	}

	// The first step installs the released fleetbot or says to build it: the Go set-up and the
	// build run only then (docs/action.md, Which fleetbot runs).
	install := md.Runs.Steps[0]
	assert.Equal(t, "install", install.ID)
	assert.Equal(t, `bash "$FLEETBOT_ACTION_PATH/scripts/action-install.sh"`, install.Run)
	assert.Equal(t, "${{ inputs.build-from-source }}", install.Env["FLEETBOT_BUILD_FROM_SOURCE"])
	assert.Equal(t, "${{ github.action_ref }}", install.Env["FLEETBOT_ACTION_REF"])
	for _, s := range md.Runs.Steps {
		if strings.HasPrefix(s.Uses, "actions/setup-go@") || strings.Contains(s.Run, "go build") {
			assert.Equal(t, "steps.install.outputs.build == 'true'", s.If, "%s runs only to build from source", s.Name)
		}
	}

	// The step running fleetbot hands it every input as INPUT_<NAME>.
	var runStep *actionStep
	for i := range md.Runs.Steps {
		if strings.Contains(md.Runs.Steps[i].Run, " action") {
			runStep = &md.Runs.Steps[i]
		}
	}
	require.NotNil(t, runStep, "a step runs `fleetbot action`")
	for _, name := range action.InputNames() {
		env := "INPUT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		assert.Equal(t, "${{ inputs."+name+" }}", runStep.Env[env], "%s passes input %s", env, name)
	}
	assert.Equal(t, "${{ github.token }}", runStep.Env["FLEETBOT_WORKFLOW_TOKEN"])

	// Outputs: each documented, each a step output of an existing step; exactly what fleetbot writes.
	var outs []string
	for name, o := range md.Outputs {
		outs = append(outs, name)
		assert.NotEmpty(t, strings.TrimSpace(o.Description), "output %s has a description", name)
		rs := refs("outputs."+name, o.Value)
		require.Len(t, rs, 1, "output %s is one step output", name)
		assert.Equal(t, "steps", rs[0].context, "output %s", name)
		assert.True(t, ids[rs[0].name], "output %s names step %s, which exists", name, rs[0].name)
		assert.Equal(t, "outputs", rs[0].field, "output %s", name)
		assert.Equal(t, "${{ steps."+runStep.ID+".outputs."+name+" }}", o.Value, "output %s", name)
		all = append(all, rs...)
	}
	sort.Strings(outs)
	wantOut := action.OutputNames()
	sort.Strings(wantOut)
	assert.Equal(t, wantOut, outs, "action.yml outputs are the outputs fleetbot action writes")
	for _, name := range outs {
		assert.Contains(t, string(doc), "| `"+name+"` |", "docs/action.md documents output %s", name)
	}

	// Every inputs.X referenced is declared, and every declared input is used.
	used := map[string]bool{}
	for _, r := range all {
		switch r.context {
		case "inputs":
			_, ok := md.Inputs[r.name]
			assert.True(t, ok, "%s references undeclared input %s", r.where, r.name)
			used[r.name] = true
		case "steps":
			assert.True(t, ids[r.name], "%s references unknown step %s", r.where, r.name)
		}
	}
	for name := range md.Inputs {
		assert.True(t, used[name], "input %s is passed to a step", name)
	}
}

// TestActionMetadataCheckerCatchesMistakes keeps the checks above honest.
func TestActionMetadataCheckerCatchesMistakes(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []ref{{where: "x", context: "inputs", name: "control-dir"}, {where: "x", context: "github", name: "token"}},
		refs("x", "a ${{ inputs.control-dir }} b ${{ github.token }}"))
	assert.Equal(t, []ref{{where: "x", context: "steps", name: "fleetbot", field: "outputs"}},
		refs("x", "${{ steps.fleetbot.outputs.plan-json }}"))
	assert.Equal(t, []ref{{where: "x", context: "inputs", name: "a"}, {where: "x", context: "inputs", name: "b"}},
		refs("x", "${{ inputs.a || inputs.b }}"))

	var md actionMetadata
	dec := yaml.NewDecoder(strings.NewReader("name: x\ndescription: y\nruns:\n  using: composite\n  stpes: []\n"))
	dec.KnownFields(true)
	assert.ErrorContains(t, dec.Decode(&md), "field stpes not found")
}

// exampleWorkflow is the part of a workflow file the examples test reads.
type exampleWorkflow struct {
	Name        string            `yaml:"name"`
	On          map[string]any    `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Concurrency *struct {
		Group            string `yaml:"group"`
		CancelInProgress bool   `yaml:"cancel-in-progress"`
	} `yaml:"concurrency"`
	Jobs map[string]struct {
		Steps []struct {
			ID   string            `yaml:"id"`
			If   string            `yaml:"if"`
			Uses string            `yaml:"uses"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// TestExampleWorkflows checks that every example uses the action with declared inputs, a
// valid mode and what its mode needs.
func TestExampleWorkflows(t *testing.T) {
	t.Parallel()
	md, _ := loadActionMetadata(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "workflows", "*.yml"))
	require.NoError(t, err)
	modes := map[string]string{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		var wf exampleWorkflow
		require.NoError(t, yaml.Unmarshal(b, &wf), file)
		assert.NotEmpty(t, wf.Name, file)
		for _, job := range wf.Jobs {
			for _, s := range job.Steps {
				if !strings.HasPrefix(s.Uses, "fleetbot-io/fleetbot@") {
					continue
				}
				for k := range s.With {
					_, ok := md.Inputs[k]
					assert.True(t, ok, "%s: input %s is declared in action.yml", file, k)
				}
				for name, in := range md.Inputs {
					if in.Required != nil && *in.Required {
						assert.NotEmpty(t, s.With[name], "%s: required input %s", file, name)
					}
				}
				mode := s.With["mode"]
				modes[mode] = filepath.Base(file)
				switch mode {
				case action.ModePlan:
					assert.Contains(t, wf.On, "pull_request", file)
					assert.Equal(t, "write", wf.Permissions["pull-requests"], "%s: the plan comment", file)
				case action.ModeApply:
					assert.Contains(t, wf.On, "push", file)
					require.NotNil(t, wf.Concurrency, "%s: two applies never overlap", file)
					assert.False(t, wf.Concurrency.CancelInProgress, "%s: an apply is never cancelled halfway", file)
					assert.NotContains(t, wf.Concurrency.Group, "github.sha", "%s: one group for every apply", file)
					assert.NotEmpty(t, s.With["app-id"], "%s: apply needs the App", file)
					assert.NotEmpty(t, s.With["private-key"], "%s: apply needs the App", file)
					// Copied as is, a push must not plan the whole fleet: cache-dir is kept between
					// runs, restored before and saved after (after a failure too) under a key of
					// its own per run, restored by prefix.
					dir := s.With["cache-dir"]
					assert.NotEmpty(t, dir, "%s: apply keeps cache-dir between runs", file)
					var restore, save map[string]string
					for _, c := range job.Steps {
						switch {
						case strings.HasPrefix(c.Uses, "actions/cache/restore@"):
							restore = c.With
						case strings.HasPrefix(c.Uses, "actions/cache/save@"):
							save = c.With
							assert.Equal(t, "always()", c.If, "%s: the cache is saved after a failed run too", file)
						}
					}
					require.NotNil(t, restore, "%s: actions/cache/restore before the apply", file)
					require.NotNil(t, save, "%s: actions/cache/save after the apply", file)
					assert.Equal(t, dir, restore["path"], file)
					assert.Equal(t, dir, save["path"], file)
					assert.Equal(t, restore["key"], save["key"], file)
					assert.Contains(t, save["key"], "github.run_id", "%s: one key per run (an entry cannot be overwritten)", file)
					assert.True(t, strings.HasPrefix(save["key"], restore["restore-keys"]), "%s: the next run restores it by prefix", file)
				case action.ModeCheckWorkspace, action.ModeCheckCluster:
				default:
					t.Errorf("%s: mode %q", file, mode)
				}
			}
		}
	}
	for _, mode := range []string{action.ModePlan, action.ModeApply, action.ModeCheckWorkspace, action.ModeCheckCluster} {
		assert.Contains(t, modes, mode, "an example workflow for mode %s", mode)
	}
}

// TestThirdPartyPinsAreImmutable: every action the Action, its examples and its docs use (other
// than fleetbot's own) is pinned to a full commit SHA with the version in a comment, and every
// base image of the Dockerfile to a digest: a moved tag cannot change what runs. The current
// majors run on node24 (checkout and setup-go v7, cache v5); bump with docs/action.md's recipe.
func TestThirdPartyPinsAreImmutable(t *testing.T) {
	t.Parallel()
	usesRE := regexp.MustCompile(`uses:\s*(\S+)(.*)`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$`)
	files := []string{filepath.Join("..", "..", "action.yml"), filepath.Join("..", "..", "docs", "action.md")}
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "workflows", "*.yml"))
	require.NoError(t, err)
	n := 0
	for _, file := range append(files, examples...) {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range usesRE.FindAllStringSubmatch(string(b), -1) {
			ref := strings.Trim(m[1], `"'`)
			if strings.HasPrefix(ref, "fleetbot-io/fleetbot@") || strings.HasPrefix(ref, "./") {
				continue
			}
			n++
			assert.Regexp(t, pinned, ref, "%s: %s is pinned to a commit", file, ref)
			assert.Regexp(t, `#\s*v\d+\.\d+\.\d+`, m[2], "%s: %s says its version in a comment", file, ref)
			if strings.HasPrefix(ref, "actions/checkout@") || strings.HasPrefix(ref, "actions/setup-go@") {
				assert.Contains(t, m[2], "v7.", "%s: %s is on the current (node24) major", file, ref)
			}
		}
	}
	assert.Positive(t, n)
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(t, err)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, froms)
	for _, m := range froms {
		if m[1] == "scratch" { // no image: nothing to pull
			continue
		}
		assert.Regexp(t, `@sha256:[0-9a-f]{64}$`, m[1], "Dockerfile: %s is pinned by digest", m[1])
	}
}

// TestExamplesPinTheMajorTag: every workflow step in the examples, the README and docs/action.md
// uses fleetbot by its major tag, one and the same, so copied as is a workflow runs the newest
// release of that major (the Action downloads and verifies its binary; docs/versioning.md says
// what a major tag promises).
func TestExamplesPinTheMajorTag(t *testing.T) {
	t.Parallel()
	step := regexp.MustCompile(`(?m)^\s*(?:-\s+)?uses:\s*fleetbot-io/fleetbot@(\S+)`)
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "workflows", "*.yml"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "docs", "action.md"))
	n := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range step.FindAllStringSubmatch(string(b), -1) {
			n++
			assert.Equal(t, "v1", m[1], "%s: uses fleetbot-io/fleetbot@v1", file)
		}
	}
	assert.GreaterOrEqual(t, n, 7, "the examples and docs/action.md use the Action")
}
