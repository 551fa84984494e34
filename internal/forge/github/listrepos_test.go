package github_test

import (
	"context"
	"fmt"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListManagedAcrossPages lists an org of 250 repos (three pages, the
// last two read concurrently): every managed repo once, in order, and an
// archived repo on the last page seen by Org.
func TestListManagedAcrossPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	human := e.srv.Client()
	for i := range 250 {
		name := fmt.Sprintf("cluster-c%03d", i)
		e.srv.CreateRepo("acme", name, nil)
		if i%2 == 0 {
			_, _, err := human.Repositories.ReplaceAllTopics(ctx, "acme", name, []string{"fleetbot-managed", "fleetbot-cluster"})
			require.NoError(t, err)
		}
	}
	_, _, err := human.Repositories.Edit(ctx, "acme", "cluster-c249", &gh.Repository{Archived: gh.Bool(true)})
	require.NoError(t, err)

	f := e.forge(t, true)
	got, err := f.ListManaged(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, got, 125)
	for i, m := range got {
		assert.Equal(t, fmt.Sprintf("cluster-c%03d", 2*i), m.Repo)
		assert.Equal(t, fmt.Sprintf("c%03d", 2*i), m.Name)
	}
	org, err := f.Org(ctx, "acme")
	require.NoError(t, err)
	assert.True(t, org.IsArchived("cluster-c249"), "an archived repo on the last page")
	assert.False(t, org.IsArchived("cluster-c000"))
}

// TestListManagedManagementRepo: a management repo (topic
// fleetbot-management, or fleetbot's description marker) is listed with its
// kind, so a management cluster that leaves the control repo is planned as
// a removal like a cluster or workspace.
func TestListManagedManagementRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	human := e.srv.Client()
	e.srv.CreateRepo("acme", "mgmt-hub-eu", nil)
	_, _, err := human.Repositories.ReplaceAllTopics(ctx, "acme", "mgmt-hub-eu", []string{"fleetbot-managed", "fleetbot-management"})
	require.NoError(t, err)
	e.srv.CreateRepo("acme", "capi-us", nil)
	_, _, err = human.Repositories.ReplaceAllTopics(ctx, "acme", "capi-us", []string{"fleetbot-managed"})
	require.NoError(t, err)
	_, _, err = human.Repositories.Edit(ctx, "acme", "capi-us", &gh.Repository{Description: gh.String("fleetbot manages this repo for management hub-us; change it through the control repo (fleetbot:management/hub-us)")})
	require.NoError(t, err)

	got, err := e.forge(t, true).ListManaged(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "capi-us", got[0].Repo)
	assert.Equal(t, "management", string(got[0].Kind))
	assert.Equal(t, "hub-us", got[0].Name)
	assert.Equal(t, "mgmt-hub-eu", got[1].Repo)
	assert.Equal(t, "management", string(got[1].Kind))
	assert.Equal(t, "mgmt-hub-eu", got[1].Name, "no marker: the name is the repo's without the kind prefix")
}
