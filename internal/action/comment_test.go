package action

import (
	"context"
	"fmt"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestUpsertCommentAcrossPages: the plan comment sits on the second page of an issue's
// comments (150 others before it); upsertComment follows the pages, edits that comment
// rather than adding one, and reads no page after it.
func TestUpsertCommentAcrossPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "control", map[string]string{"README.md": "control\n"})
	c := srv.Client()
	is, _, err := c.Issues.Create(ctx, "acme", "control", &gh.IssueRequest{Title: gh.String("plan")})
	require.NoError(t, err)
	n := is.GetNumber()
	for i := range 150 {
		_, _, err := c.Issues.CreateComment(ctx, "acme", "control", n, &gh.IssueComment{Body: gh.String(fmt.Sprintf("comment %d", i))})
		require.NoError(t, err)
	}
	old, _, err := c.Issues.CreateComment(ctx, "acme", "control", n, &gh.IssueComment{Body: gh.String(PlanMarker + "\nold plan")})
	require.NoError(t, err)
	for i := range 120 {
		_, _, err := c.Issues.CreateComment(ctx, "acme", "control", n, &gh.IssueComment{Body: gh.String(fmt.Sprintf("later %d", i))})
		require.NoError(t, err)
	}

	srv.ResetLog()
	id, err := upsertComment(ctx, c, "acme", "control", n, PlanMarker+"\nnew plan")
	require.NoError(t, err)
	assert.Equal(t, old.GetID(), id, "the existing plan comment is edited")
	comments := srv.Comments("acme", "control", n)
	assert.Len(t, comments, 271, "no comment added")
	assert.Equal(t, PlanMarker+"\nnew plan", comments[150])
	assert.Equal(t, []string{"PATCH /repos/{owner}/{repo}/issues/comments/{id}"}, routes(srv, githubtest.Write))
	lists := 0
	for _, r := range srv.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, "/comments") {
			lists++
		}
	}
	assert.Equal(t, 2, lists, "pages 1 and 2 read, page 3 not")

	// Unchanged: nothing written.
	srv.ResetLog()
	id, err = upsertComment(ctx, c, "acme", "control", n, PlanMarker+"\nnew plan")
	require.NoError(t, err)
	assert.Equal(t, old.GetID(), id)
	assert.Empty(t, routes(srv, githubtest.Write))
}

// routes returns the routes of the requests of class, but for minting installation tokens.
func routes(srv *githubtest.Server, class githubtest.Class) []string {
	var out []string
	for _, r := range srv.Requests() {
		if r.Class == class && r.Route != "POST /app/installations/{id}/access_tokens" {
			out = append(out, r.Route)
		}
	}
	return out
}
