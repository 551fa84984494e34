package control

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// wave1 is one valid wave whose extra lines start at platform.yaml:18.
const wave1 = "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {matchLabels: {env: dev}}\n"

// TestRolloutRulesBadInput: every invalid budget, failure action, approval, change window and
// health setting is an issue at its file:line with a hint, and nothing loads.
func TestRolloutRulesBadInput(t *testing.T) {
	windows := func(w string) string { return "  rollout:\n    windows:\n      - " + w + "\n" }
	tests := []struct {
		name  string
		spec  string
		files map[string]string
		want  want
	}{
		{name: "budget over 100%", spec: wave1 + "        maxUnavailable: 150%\n",
			want: want{pos: "platform.yaml:18", msg: `invalid spec.rollout.waves.0.maxUnavailable "150%"`, hint: "between 0% and 100%"}},
		{name: "negative budget", spec: wave1 + "        maxFailures: -1\n",
			want: want{pos: "platform.yaml:18", msg: "spec.rollout.waves.0.maxFailures must not be negative"}},
		{name: "budget neither count nor percent", spec: wave1 + "        maxFailures: some\n",
			want: want{pos: "platform.yaml:18", msg: `invalid spec.rollout.waves.0.maxFailures "some"`, hint: `"10%"`}},
		{name: "budget as a list", spec: wave1 + "        maxFailures: [1]\n",
			want: want{pos: "platform.yaml:18", msg: "maxFailures", hint: ""}},
		{name: "unknown wave onFailure", spec: wave1 + "        onFailure: retry\n",
			want: want{pos: "platform.yaml:18", msg: `invalid onFailure "retry"`, hint: "rollback"}},
		{name: "unknown rollout onFailure", spec: "  rollout:\n    onFailure: undo\n",
			want: want{pos: "platform.yaml:15", msg: `invalid onFailure "undo"`}},
		{name: "unknown approval", spec: wave1 + "        approval: yes\n",
			want: want{pos: "platform.yaml:18", msg: `wave "canary": invalid approval "yes"`, hint: "approval: required"}},
		{name: "window without kind", spec: windows("{start: \"09:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: "window 1: the window has no kind"}},
		{name: "unknown window kind", spec: windows("{kind: maybe, start: \"09:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: invalid window kind "maybe"`}},
		{name: "unknown day", spec: windows("{kind: allow, days: [Mon, Funday], start: \"09:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: invalid day "Funday"`, hint: "Mon, Tue"}},
		{name: "day twice", spec: windows("{kind: allow, days: [Mon, Mon], start: \"09:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: "window 1: day Mon is listed twice"}},
		{name: "start without a leading zero", spec: windows("{kind: allow, start: \"9:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: invalid start "9:00"`, hint: "HH:MM"}},
		{name: "start past the day", spec: windows("{kind: allow, start: \"24:00\", duration: 8h}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: invalid start "24:00"`}},
		{name: "no duration", spec: windows("{kind: allow, start: \"09:00\"}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: invalid duration ""`}},
		{name: "duration over a week", spec: windows("{kind: deny, start: \"09:00\", duration: 169h}"),
			want: want{pos: "platform.yaml:16", msg: "window 1: duration 169h is longer than a week"}},
		{name: "duration under a minute", spec: windows("{kind: deny, start: \"09:00\", duration: 30s}"),
			want: want{pos: "platform.yaml:16", msg: "window 1: duration 30s is shorter than a minute"}},
		{name: "unknown time zone", spec: windows("{kind: allow, start: \"09:00\", duration: 8h, timeZone: Mars/Olympus}"),
			want: want{pos: "platform.yaml:16", msg: `window 1: unknown time zone "Mars/Olympus"`, hint: "IANA"}},
		{name: "the machine's time zone", spec: windows("{kind: allow, start: \"09:00\", duration: 8h, timeZone: Local}"),
			want: want{pos: "platform.yaml:16", msg: "window 1: timeZone Local depends on the machine"}},
		{name: "no allow time left",
			spec: "  rollout:\n    windows:\n      - {kind: allow, days: [Mon, Tue, Wed, Thu, Fri], start: \"09:00\", duration: 8h, timeZone: Europe/Berlin}\n" +
				"      - {kind: deny, days: [Mon, Tue, Wed, Thu, Fri], start: \"08:00\", duration: 10h, timeZone: Europe/Berlin}\n",
			want: want{pos: "platform.yaml:15", msg: "the deny windows cover every minute the allow windows give", hint: "shorten a deny window"}},
		{name: "a freeze of every day", spec: "  rollout:\n    windows:\n      - {kind: deny, start: \"00:00\", duration: 24h}\n",
			want: want{pos: "platform.yaml:15", msg: "no time is left to roll out"}},
		{name: "unknown health provider", spec: "  rollout:\n    health: {provider: slack}\n",
			want: want{pos: "platform.yaml:15", msg: `invalid health provider "slack"`}},
		{name: "generic-hmac without url", spec: "  rollout:\n    health: {provider: generic-hmac}\n",
			want: want{pos: "platform.yaml:15", msg: "health provider generic-hmac needs a url"}},
		{name: "a url with credentials", spec: "  rollout:\n    health: {provider: generic-hmac, url: \"https://user:pw@fleetbot.example.com/health\"}\n",
			want: want{pos: "platform.yaml:15", msg: "it carries credentials"}},
		{name: "a url of another scheme", spec: "  rollout:\n    health: {provider: generic-hmac, url: \"ftp://fleetbot.example.com/health\"}\n",
			want: want{pos: "platform.yaml:15", msg: "the scheme must be https or http"}},
		{name: "a url with a query", spec: "  rollout:\n    health: {provider: generic-hmac, url: \"https://fleetbot.example.com/health?x=1\"}\n",
			want: want{pos: "platform.yaml:15", msg: "a query or fragment"}},
		{name: "a url without provider", spec: "  rollout:\n    health: {url: \"https://fleetbot.example.com/health\"}\n",
			want: want{pos: "platform.yaml:15", msg: "health url is only used with provider generic-hmac", hint: "provider: generic-hmac"}},
		{name: "approval only bots may give", spec: wave1 + "        approval: required\n",
			files: map[string]string{".github/CODEOWNERS": "* @acme/platform\n/rollout/ @fleetbot-app[bot]\n"},
			want: want{pos: "platform.yaml:18", msg: `wave "canary" requires approval, but nobody can give it: .github/CODEOWNERS:2 gives rollout/approvals/canary.yaml only to owners who cannot approve (@fleetbot-app[bot] is a bot)`,
				hint: "/rollout/approvals/ @acme/platform"}},
		{name: "approval by a team fleetbot keeps off the control repo",
			spec:  "  repos: {control: fleet-control}\n" + wave1 + "        approval: required\n",
			files: map[string]string{"CODEOWNERS": "* @acme/platform\nrollout/approvals/*.yaml @acme/release\n"},
			want:  want{pos: "platform.yaml:19", msg: "CODEOWNERS:2 gives rollout/approvals/canary.yaml only to owners who cannot approve (@acme/release is no platform admin team, and fleetbot keeps every other team off the control repo fleet-control)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"platform.yaml": platformWith(tt.spec)}
			for k, v := range tt.files {
				files[k] = v
			}
			repo, err := Load(fixture(t, files))
			assert.Nil(t, repo, "nobody plans from an invalid control repo")
			var is Issues
			require.ErrorAs(t, err, &is)
			assertIssue(t, is, tt.name, tt.want)
			for _, i := range is {
				assert.NotEmpty(t, i.Hint, "%s: every issue says what to do: %s", tt.name, i)
			}
		})
	}
}

// TestRolloutRulesValid: a rollout with budgets, failure actions, approvals, windows and
// generic-hmac health loads without a warning, and its plan and schedule carry them.
func TestRolloutRulesValid(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		"platform.yaml": platformWith(`  rollout:
    onFailure: rollback
    windows:
      - {kind: allow, days: [Mon, Tue, Wed, Thu], start: "09:00", duration: 8h, timeZone: Europe/Berlin}
      - {kind: deny, days: [Wed], start: "12:00", duration: 2h, timeZone: Europe/Berlin}
    health: {provider: generic-hmac, url: "https://fleetbot.example.com/health"}
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
        maxUnavailable: 50%
        merge: auto
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
        approval: required
        onFailure: halt
        maxFailures: 0
        maxUnavailable: "10%"
`),
		".github/CODEOWNERS": "* @acme/platform\n/rollout/approvals/ @acme/release-managers\n",
	}))
	require.NoError(t, err)
	assert.Empty(t, repo.Warnings)
	// The schema's readings with their defaults (the rollout slice's plan carries them:
	// rollout.TestPlanCarriesTheRules).
	canary, prod := repo.Platform.Spec.Rollout.Waves[0], repo.Platform.Spec.Rollout.Waves[1]
	unavailable, failures := canary.Budget()
	assert.Equal(t, intstr.FromString("50%"), unavailable)
	assert.Equal(t, intstr.FromString("50%"), failures, "maxFailures defaults to maxUnavailable")
	assert.Equal(t, OnFailureRollback, repo.Platform.Spec.Rollout.FailureAction(canary), "spec.rollout.onFailure")
	unavailable, failures = prod.Budget()
	assert.Equal(t, intstr.FromString("10%"), unavailable)
	assert.Equal(t, intstr.FromInt32(0), failures)
	assert.Equal(t, OnFailureHalt, repo.Platform.Spec.Rollout.FailureAction(prod), "the wave's own onFailure")
	assert.Equal(t, ApprovalRequired, prod.Approval)
	rule, ok := repo.Codeowners.Owner(ApprovalFile("prod"))
	require.True(t, ok)
	assert.Equal(t, []string{"@acme/release-managers"}, rule.Owners)

	s := repo.Schedule()
	require.Len(t, s, 2)
	wednesday := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	assert.True(t, s.Open(wednesday.Add(9*time.Hour)), "10:00 in Berlin")
	assert.False(t, s.Open(wednesday.Add(11*time.Hour)), "12:00 in Berlin: the deny window")
	next, ok := s.NextOpen(wednesday.Add(11 * time.Hour))
	require.True(t, ok)
	assert.Equal(t, wednesday.Add(13*time.Hour), next)
}

// TestRolloutRuleWarnings: settings that are legal but almost always a mistake are warnings
// with a hint, and the repo still loads.
func TestRolloutRuleWarnings(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		"platform.yaml": platformWith(`  rollout:
    health: {provider: generic-hmac, url: "http://fleetbot.example.com/health"}
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
        maxUnavailable: 1
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
        maxFailures: 2
        maxUnavailable: 1
        onFailure: rollback
`),
		"rollout/approvals/staging.yaml": "digest: sha256:" + strings.Repeat("a", 64) + "\n",
		"rollout/skips/gone-1.yaml":      "digest: sha256:" + strings.Repeat("a", 64) + "\n",
	}))
	require.NoError(t, err)
	var got []string
	for _, w := range repo.Warnings {
		got = append(got, w.Pos.String()+": "+w.Message)
		assert.NotEmpty(t, w.Hint, w.String())
	}
	assert.Equal(t, []string{
		"platform.yaml:15: health url http://fleetbot.example.com/health is not https",
		"platform.yaml:19: wave canary: maxUnavailable 1 lets all of its 1 clusters fail or stay silent and the rollout go on",
		"platform.yaml:20: wave prod rolls back on failure, but its pull requests merge by hand: the rollback pull requests wait for a platform admin to merge them",
		"platform.yaml:22: wave prod: maxFailures 2 is above maxUnavailable 1, so it never applies",
		"platform.yaml:23: wave prod: maxUnavailable 1 lets all of its 1 clusters fail or stay silent and the rollout go on",
		"rollout/approvals/staging.yaml:1: rollout/approvals/staging.yaml approves wave staging, which is not declared",
		"rollout/skips/gone-1.yaml:1: rollout/skips/gone-1.yaml skips cluster gone-1, which is not in clusters/",
	}, got)

	repo, err = Load(fixture(t, map[string]string{"platform.yaml": platformWith("  rollout:\n    health: {provider: generic-hmac, url: \"https://fleetbot.example.com/health\"}\n")}))
	require.NoError(t, err)
	require.Len(t, repo.Warnings, 1)
	assert.Contains(t, repo.Warnings[0].Message, "health provider generic-hmac is set, but no waves are declared")
}

// TestRolloutRecords: approvals and skips load from rollout/, and apply only to the content
// they name: a commit that changes an input of the render makes them lapse, one that only
// adds records does not.
func TestRolloutRecords(t *testing.T) {
	spec := wave1 + "        approval: required\n"
	base := map[string]string{"platform.yaml": platformWith(spec)}
	repo, err := Load(fixture(t, base))
	require.NoError(t, err)
	digest := repo.Digest
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, digest)
	assert.Empty(t, repo.ApprovedWaves())

	withRecords := map[string]string{
		"platform.yaml":                 platformWith(spec),
		"rollout/approvals/canary.yaml": "digest: " + digest + "\nrevision: 0123abcd\nnote: canary looked fine\n",
		"rollout/skips/prod-eu-1.yaml":  "digest: " + digest + "\nnote: cluster is being rebuilt\n",
		"rollout/approvals/README.md":   "approvals live here\n",
		"rollout/paused":                "maintenance\n",
		"rollout/rollback.yaml":         "digest: " + digest + "\nrevision: 0123abcd\nnote: canary alerts\n",
	}
	repo, err = Load(fixture(t, withRecords))
	require.NoError(t, err)
	assert.Equal(t, digest, repo.Digest, "records, the pause and READMEs are not inputs of the render")
	assert.Equal(t, map[string]bool{"canary": true}, repo.ApprovedWaves())
	assert.Equal(t, map[string]bool{"prod-eu-1": true}, repo.SkippedClusters())
	require.Len(t, repo.Approvals, 1)
	assert.Equal(t, RolloutRecord{Name: "canary", Digest: digest, Revision: "0123abcd", Note: "canary looked fine", Source: repo.Approvals[0].Source}, repo.Approvals[0])
	assert.Equal(t, "rollout/approvals/canary.yaml", repo.Approvals[0].Source.File)
	require.NotNil(t, repo.RolledBack())
	assert.Equal(t, "canary alerts", repo.RolledBack().Note)
	assert.Equal(t, "rollout/rollback.yaml", repo.RolledBack().Source.File)

	// A new cluster: new content, the records lapse (they stay in the repo, applying to nothing).
	withRecords["clusters/edge-1.yaml"] = "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge-1}\n"
	repo, err = Load(fixture(t, withRecords))
	require.NoError(t, err)
	assert.NotEqual(t, digest, repo.Digest)
	assert.Empty(t, repo.ApprovedWaves())
	assert.Empty(t, repo.SkippedClusters())
	assert.Nil(t, repo.RolledBack(), "a newer control commit ends the rollback's hold")
	assert.Len(t, repo.Approvals, 1)
}

// TestDigest: the digest is the content of the render's inputs: the same files give the same
// digest, a change to any input (platform, cluster, workspace, a catalog file) gives another,
// and files that are not inputs (CODEOWNERS, a README, rollout records) change nothing.
func TestDigest(t *testing.T) {
	digest := func(files map[string]string) string {
		t.Helper()
		repo, err := Load(fixture(t, files))
		require.NoError(t, err)
		return repo.Digest
	}
	base := digest(nil)
	assert.Equal(t, base, digest(nil), "deterministic")
	for name, files := range map[string]map[string]string{
		"CODEOWNERS":       {".github/CODEOWNERS": "* @acme/platform\n"},
		"a README":         {"README.md": "# control\n", "clusters/README.md": "one file per cluster\n"},
		"a rollout record": {"rollout/skips/dev-us-1.yaml": "digest: " + base + "\n"},
	} {
		assert.Equal(t, base, digest(files), name)
	}
	platform := platformWith("")
	for name, files := range map[string]map[string]string{
		"platform.yaml":  {"platform.yaml": platform + "  flux: {interval: 5m}\n"},
		"a cluster":      {"clusters/edge-1.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge-1}\n"},
		"a workspace":    {"workspaces/ops.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: ops}\n"},
		"a catalog file": {"catalog/monitoring/extra.yaml": "# a comment\n"},
	} {
		assert.NotEqual(t, base, digest(files), name)
	}
}

// TestRolloutRecordBadInput: a record that cannot apply is an issue naming the file.
func TestRolloutRecordBadInput(t *testing.T) {
	good := "digest: sha256:" + strings.Repeat("0", 64) + "\n"
	for name, tc := range map[string]struct {
		file, content string
		want          want
	}{
		"no digest":       {"rollout/approvals/canary.yaml", "note: ok\n", want{pos: "rollout/approvals/canary.yaml:1", msg: "the record names no digest", hint: "fleetbot rollout approve"}},
		"a bad digest":    {"rollout/skips/dev-us-1.yaml", "digest: md5:abc\n", want{pos: "rollout/skips/dev-us-1.yaml:1", msg: `invalid digest "md5:abc"`, hint: "fleetbot rollout skip"}},
		"a bad revision":  {"rollout/skips/dev-us-1.yaml", good + "revision: main\n", want{pos: "rollout/skips/dev-us-1.yaml:2", msg: `invalid revision "main"`}},
		"an unknown key":  {"rollout/approvals/canary.yaml", good + "approver: me\n", want{pos: "rollout/approvals/canary.yaml:2", msg: `unknown field "approver"`}},
		"a bad file name": {"rollout/approvals/Canary_1.yaml", good, want{pos: "rollout/approvals/Canary_1.yaml", msg: `"Canary_1" is not a wave name`}},
		"a list":          {"rollout/approvals/canary.yaml", "- digest: x\n", want{pos: "rollout/approvals/canary.yaml:1", msg: "expected an object"}},
		"too big":         {"rollout/approvals/canary.yaml", good + "note: " + strings.Repeat("x", MaxRecordBytes) + "\n", want{pos: "rollout/approvals/canary.yaml", msg: "more than the 4096 a rollout record may have"}},
		"a long note":     {"rollout/approvals/canary.yaml", good + "note: " + strings.Repeat("x", MaxRecordNote+1) + "\n", want{pos: "rollout/approvals/canary.yaml:2", msg: "the note has 1025 bytes"}},
		"nested":          {"rollout/approvals/eu/canary.yaml", good, want{pos: "rollout/approvals/eu", msg: "rollout/approvals/eu is not read"}},
	} {
		t.Run(name, func(t *testing.T) {
			repo, err := Load(fixture(t, map[string]string{tc.file: tc.content}))
			assert.Nil(t, repo)
			var is Issues
			require.ErrorAs(t, err, &is)
			assertIssue(t, is, name, tc.want)
		})
	}
}

// TestCodeownersOwner: the owner of a path is the last matching line, with GitHub's reading
// of the patterns.
func TestCodeownersOwner(t *testing.T) {
	for _, tc := range []struct {
		file, path string
		owners     []string // nil: no owner
	}{
		{"* @a/x\n", "rollout/approvals/prod.yaml", []string{"@a/x"}},
		{"* @a/x\n/rollout/ @a/y\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
		{"/rollout/ @a/y\n* @a/x\n", "rollout/approvals/prod.yaml", []string{"@a/x"}},
		{"rollout/approvals/*.yaml @a/y # approvers\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
		{"rollout/*  @a/y\n", "rollout/approvals/prod.yaml", nil},
		{"rollout/** @a/y\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
		{"approvals/ @a/y\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
		{"/approvals/ @a/y\n", "rollout/approvals/prod.yaml", nil},
		{"*.yaml @a/y\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
		{"prod.yaml\n", "rollout/approvals/prod.yaml", []string{}},
		{"!rollout/ @a/y\n[a-z]* @a/z\n", "rollout/approvals/prod.yaml", nil},
		{"# only a comment\n\n", "rollout/approvals/prod.yaml", nil},
		{"/rollout/approvals/p?od.yaml @a/y\n", "rollout/approvals/prod.yaml", []string{"@a/y"}},
	} {
		rule, ok := ParseCodeowners("CODEOWNERS", []byte(tc.file)).Owner(tc.path)
		if tc.owners == nil {
			assert.False(t, ok, "%q owns nothing of %s", tc.file, tc.path)
			continue
		}
		if assert.True(t, ok, "%q owns %s", tc.file, tc.path) {
			assert.Equal(t, len(tc.owners), len(rule.Owners), tc.file)
			for i := range tc.owners {
				assert.Equal(t, tc.owners[i], rule.Owners[i], tc.file)
			}
		}
	}
}
