package github_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestTeamMember(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateTeam("acme", "platform", "alice")
	srv.CreateTeam("acme", "payments-devs", "bob")
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme", ReadOnly: true,
	})
	require.NoError(t, err)
	ctx := context.Background()
	for _, tc := range []struct {
		team, login string
		want        bool
	}{
		{"platform", "alice", true},
		{"platform", "bob", false},
		{"payments-devs", "bob", true},
		{"no-such-team", "bob", false},
	} {
		got, err := c.TeamMember(ctx, "acme", tc.team, tc.login)
		require.NoError(t, err, "%s in %s", tc.login, tc.team)
		assert.Equal(t, tc.want, got, "%s in %s", tc.login, tc.team)
	}
}
