package github

import (
	"context"
	"fmt"
)

// TeamMember reports whether login is an active member of the team slug of org: what
// `fleetbot check control` asks about a PR's author, one request per team it needs to know.
// A pending invitation is not membership; a missing team or user is "not a member".
//
// GitHub API docs: https://docs.github.com/rest/teams/members#get-team-membership-for-a-user
func (c *Client) TeamMember(ctx context.Context, org, slug, login string) (bool, error) {
	m, _, err := c.api.Teams.GetTeamMembershipBySlug(ctx, org, slug, login)
	if IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, Wrap(err, fmt.Sprintf("reading the membership of %s in team %s of", login, slug), org)
	}
	return m.GetState() == "active", nil
}
