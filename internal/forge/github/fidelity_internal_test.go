package github

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// accessServer answers the three access reads of acme/r with the given bodies.
func accessServer(t *testing.T, teams, protection string) *Forge {
	t.Helper()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("GET /repos/acme/r/teams", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(teams))
	})
	s.mux.HandleFunc("GET /repos/acme/r/collaborators", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[]`))
	})
	s.mux.HandleFunc("GET /repos/acme/r/branches/main/protection", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(protection))
	})
	c, err := New(context.Background(), Config{APIURL: s.apiURL(), Token: "t"})
	require.NoError(t, err)
	return NewForge(c, ForgeOptions{})
}

// TestAccessSparseAnswers: a team without permission fields and a protection without
// allow_force_pushes / allow_deletions (both optional in GitHub's schema) are read without a
// nil dereference; absent means not allowed, and no permission at all means pull.
func TestAccessSparseAnswers(t *testing.T) {
	t.Parallel()
	f := accessServer(t, `[{"id":1,"slug":"platform","name":"platform"}]`,
		`{"required_pull_request_reviews":{"require_code_owner_reviews":true,"required_approving_review_count":1}}`)
	a, err := f.readAccess(context.Background(), "acme", "r", "main")
	require.NoError(t, err)
	assert.Equal(t, map[string]policy.Role{"platform": policy.RolePull}, a.Teams)
	require.NotNil(t, a.Protection)
	assert.False(t, a.Protection.AllowForcePushes)
	assert.False(t, a.Protection.AllowDeletions)
	assert.True(t, a.Protection.RequireCodeOwnerReviews)
}

// TestAccessTeamWithoutSlug: a team GitHub lists without a slug is an error naming the repo
// and the team, not an entry under "" that a later revoke would act on.
func TestAccessTeamWithoutSlug(t *testing.T) {
	t.Parallel()
	f := accessServer(t, `[{"id":7,"name":"Ghost team"}]`, `{}`)
	_, err := f.readAccess(context.Background(), "acme", "r", "main")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acme/r")
	assert.Contains(t, err.Error(), `"Ghost team"`)
	assert.Contains(t, err.Error(), "without a slug")
}
