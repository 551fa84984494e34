package action

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/ghaction"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// fleetReport is an apply at fleet scale: 1,000 new repos with 30 files each, 510 of them with
// the same warning, 30 failed (each its own error), 20 deferred by the write budget and 150
// with nothing to do: 1,200 repos.
func fleetReport() *report.Document {
	var repos []report.Repo
	files := make([]report.File, 30)
	for i := range files {
		files[i] = report.File{Path: fmt.Sprintf("platform/app-%02d/app.yaml", i), Op: "added"}
	}
	for i := range 1200 {
		r := report.Repo{Repo: fmt.Sprintf("acme/cluster-%04d", i), Kind: "cluster", Outcome: report.Outcome{Class: report.ClassDone}}
		switch {
		case i >= 1050:
			r.Action, r.Reason = report.ActionNoop, "main already carries the desired tree"
		case i%35 == 7: // 30 of them
			r.Action, r.Planned = report.ActionFailed, "create"
			r.Outcome = report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonUnavailable}
			r.Error = &report.Problem{Message: fmt.Sprintf("creating acme/cluster-%04d: GitHub answered 502", i)}
		case i%50 == 11 && i < 1000: // 20 of them
			r.Action, r.Planned = report.ActionDeferred, "create"
			r.Outcome = report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted}
			r.Deferred = "the content budget (80/min) has no room"
		default:
			r.Action, r.Writes, r.Changed, r.Reason = "create", true, true, "new repo"
			r.PR = &report.PR{Number: 1}
			r.Files = report.Files{Added: len(files), List: files}
			if i%2 == 0 {
				r.Warnings = []string{"team platform-oncall is not in the org: CODEOWNERS names it"}
			}
		}
		repos = append(repos, r)
	}
	return report.New("apply", "0123456789abcdef0123456789abcdef01234567", repos)
}

// testRun is an actionRun on a simulated runner whose log goes to log.
func testRun(t *testing.T, log *bytes.Buffer) *actionRun {
	t.Helper()
	temp := t.TempDir()
	env := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/control", "GITHUB_WORKSPACE": temp,
		"RUNNER_TEMP": temp, "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
		"GITHUB_OUTPUT": filepath.Join(temp, "output"), "GITHUB_STEP_SUMMARY": filepath.Join(temp, "summary"),
		"GITHUB_RUN_ID": "4242", "GITHUB_SERVER_URL": "https://github.com",
	}
	e, err := ghaction.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	return &actionRun{opts: Options{Stdout: log, Stderr: log, Version: "dev"}, env: e, cmds: ghaction.NewCommands(log)}
}

// TestApplyAtFleetScaleStaysBounded: an apply of 1,200 repos logs what matters in about sixty
// lines, not twelve hundred: the repos that failed first, then those deferred and changed up to
// fifty, how many more and where they all are (plan-json), the repos with nothing to do counted,
// the warning 510 repos share once with its count, at most ten annotations of a level (the
// tenth counting the rest), and the summary line with the counts by action last. The job
// summary lists 100 repos and stays far under GitHub's 1 MiB.
func TestApplyAtFleetScaleStaysBounded(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	r := testRun(t, &log)
	d := fleetReport()
	res := &Result{Mode: ModeApply, Valid: true, Source: d.Source, Report: d}

	r.annotateRepos(d)
	r.logReport(d)
	require.NoError(t, r.finish(res, r.applyMarkdown(res)))

	lines := strings.Split(strings.TrimRight(log.String(), "\n"), "\n")
	assert.LessOrEqual(t, len(lines), 90, "the log of 1,200 repos is a page:\n%s", log.String())
	assert.Equal(t, "1200 repos: 1000 create, 20 deferred, 30 failed, 150 noop (source 0123456789ab)", lines[len(lines)-1],
		"the log ends with the summary line and its counts by action")
	text := log.String()
	plan := filepath.Join(r.env.RunnerTemp, PlanJSONName)
	assert.Contains(t, text, "and 1000 more repos that change or need a look: the plan-json output ("+plan+"; keep it with actions/upload-artifact) lists every repo")
	assert.Contains(t, text, "not listed: 150 repos with nothing to do (150 noop); the plan-json output")
	assert.Contains(t, text, "WARNING (510 repos: acme/cluster-0000, acme/cluster-0002, acme/cluster-0004 and 507 more): team platform-oncall is not in the org")
	assert.Equal(t, 1, strings.Count(text, "team platform-oncall is not in the org: CODEOWNERS names it\n"), "the warning is folded")

	// The table: the 30 failed repos first, then the 20 deferred, then the first changes.
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "acme/cluster-") {
			rows = append(rows, l)
		}
	}
	require.Len(t, rows, logRows)
	for i, row := range rows {
		f := strings.Fields(row)
		switch {
		case i < 30:
			assert.Equal(t, report.ActionFailed, f[2], row)
		case i < 50:
			assert.Equal(t, report.ActionDeferred, f[2], row)
		}
	}

	// Annotations: nine of each level and a tenth counting the rest.
	assert.Equal(t, ghaction.MaxAnnotations, strings.Count(text, "::error "), text)
	assert.Equal(t, ghaction.MaxAnnotations, strings.Count(text, "::warning "), text)
	assert.Contains(t, text, "::error title=fleetbot::21 more error annotations not shown (GitHub shows 10 per step): the job summary has them all")
	assert.Contains(t, text, "::warning title=fleetbot::11 more warning annotations not shown")

	summary, err := os.ReadFile(r.env.StepSummary)
	require.NoError(t, err)
	assert.Less(t, len(summary), 256<<10, "the job summary is bounded well under GitHub's 1 MiB")
	assert.Contains(t, string(summary), "1200 repos: 1000 create, 20 deferred, 30 failed, 150 noop")
	assert.Equal(t, summaryRows, strings.Count(string(summary), "\n| `acme/cluster-"), "the summary's table lists %d repos", summaryRows)
	assert.Contains(t, string(summary), "and 950 more repos that change or need a look: the plan-json output")
	assert.Contains(t, string(summary), "- team platform-oncall is not in the org: CODEOWNERS names it (510 repos: ")
	assert.Contains(t, string(summary), "[run 4242](https://github.com/acme/control/actions/runs/4242)", "nothing was cut: the footer is there")

	// plan-json has every repo.
	b, err := os.ReadFile(plan)
	require.NoError(t, err)
	assert.Equal(t, 1200, strings.Count(string(b), `"repo": "acme/cluster-`))
}

// TestStepLogIsBounded: the progress of a run of 1,050 repos is a line per tenth of each phase;
// a phase of six repos is one line, when it is done.
func TestStepLogIsBounded(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	s := &stepLog{w: &b}
	for _, phase := range []string{"read", "plan", "apply"} {
		for done := 0; done <= 1050; done++ {
			s.step(phase, done, 1050)
		}
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Len(t, lines, 30)
	assert.Equal(t, "fleetbot: read 105 of 1050 repos", lines[0])
	assert.Equal(t, "fleetbot: applied 1050 of 1050 repos", lines[29])
	b.Reset()
	s = &stepLog{w: &b}
	for done := 0; done <= 6; done++ {
		s.step("apply", done, 6)
	}
	assert.Equal(t, "fleetbot: applied 6 of 6 repos\n", b.String())
}

// TestPlanWithoutTheAppAtFleetScale: the plan of a control repo of 150 clusters (fleetgen: 153
// target repos), without the App, end to end through Run, shows the desired state of 100
// target repos in the job summary and says how many more and where they all are. (150, not
// 1,050: the render under the race detector took 80 s at 1,050 on 2 busy cores; the 1,200 repos
// of TestApplyAtFleetScaleStaysBounded test the bounds at fleet scale.)
func TestPlanWithoutTheAppAtFleetScale(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctl := filepath.Join(dir, "control")
	require.NoError(t, fleetgen.WriteDir(ctl, fleetgen.Options{Clusters: 150, Apps: 1, Seed: 36}))
	summary, output := filepath.Join(dir, "summary"), filepath.Join(dir, "output")
	env := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/control", "GITHUB_WORKSPACE": dir,
		"RUNNER_TEMP": dir, "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
		"GITHUB_OUTPUT": output, "GITHUB_STEP_SUMMARY": summary,
		"INPUT_MODE": "plan", "INPUT_CONTROL-DIR": "control",
	}
	var log bytes.Buffer
	err := Run(context.Background(), Options{Stdout: &log, Stderr: &log, Getenv: func(k string) string { return env[k] }, Version: "dev"})
	require.NoError(t, err, log.String())
	b, err := os.ReadFile(summary)
	require.NoError(t, err)
	md := string(b)
	assert.Less(t, len(md), 64<<10, "the summary (and the plan comment) is bounded")
	assert.Contains(t, md, "153 target repos.")
	assert.Equal(t, summaryRows, strings.Count(md, "\n| `"), "the desired state lists %d repos", summaryRows)
	assert.Contains(t, md, "and 53 more target repos: the plan-json output ("+filepath.Join(dir, PlanJSONName))
	assert.Less(t, strings.Count(log.String(), "\n"), 10, "the log says little: %s", log.String())
}
