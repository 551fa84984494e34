package control

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTeamRefs(t *testing.T) {
	repo, err := LoadDir(validDir)
	require.NoError(t, err)
	var got []string
	for _, r := range repo.TeamRefs() {
		got = append(got, r.Pos.String()+" "+r.Slug+" "+r.Persona+" "+r.Of)
	}
	assert.Contains(t, got, "platform.yaml:6 platform platform admin ")
	assert.Contains(t, got, "clusters/prod-eu-1.yaml:8 payments-sre cluster admin prod-eu-1")
	assert.Contains(t, got, "workspaces/payments.yaml:5 payments-devs workspace admin payments")
}

func TestMissingTeams(t *testing.T) {
	repo, err := LoadDir(validDir)
	require.NoError(t, err)
	exists := func(slug string) bool { return slug != "payments-sre" && slug != "payments-devs" }
	is := repo.MissingTeams("acme", exists)
	require.Len(t, is, 2)
	assert.Equal(t, "clusters/prod-eu-1.yaml:8", is[0].Pos.String())
	assert.Equal(t, `team "payments-sre" does not exist in org acme`, is[0].Message)
	assert.Contains(t, is[0].Hint, "cluster admins of prod-eu-1")
	assert.Equal(t, "workspaces/payments.yaml:5", is[1].Pos.String())
	assert.Empty(t, repo.MissingTeams("acme", func(string) bool { return true }))
}

func TestControlRepoName(t *testing.T) {
	orig, err := os.ReadFile(validDir + "/platform.yaml")
	require.NoError(t, err)
	platform := strings.Replace(string(orig), "  admins: [platform]\n", "  admins: [platform]\n  repos: {control: %s}\n", 1)
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": fmt.Sprintf(platform, "fleet-control")}))
	require.NoError(t, err)
	assert.Equal(t, "fleet-control", repo.Platform.Spec.Repos.Control)

	is := loadIssues(t, fixture(t, map[string]string{"platform.yaml": fmt.Sprintf(platform, "bad/name")}), "bad name")
	require.Len(t, is, 1)
	assert.Equal(t, "platform.yaml:7", is[0].Pos.String())
	assert.Contains(t, is[0].Message, `control repo name "bad/name"`)

	is = loadIssues(t, fixture(t, map[string]string{"platform.yaml": fmt.Sprintf(platform, "cluster-prod-eu-1")}), "collision")
	require.Len(t, is, 1)
	assert.Equal(t, "clusters/prod-eu-1.yaml:4", is[0].Pos.String())
	assert.Contains(t, is[0].Message, "the control repo (spec.repos.control)")
	assert.Contains(t, is[0].Hint, "spec.repos.control")
}
