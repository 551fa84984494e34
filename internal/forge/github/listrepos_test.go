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
