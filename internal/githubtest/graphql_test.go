package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// graphQL posts a query to the fake as DefaultUser and decodes the whole answer.
func graphQL(t *testing.T, s *Server, query string, vars map[string]any) map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/api/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GitHub answers GraphQL errors with 200")
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func TestGraphQLRepositoryOwnerPages(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	for i := range 3 {
		s.CreateRepo("acme", fmt.Sprintf("repo-%d", i), map[string]string{"README.md": "hi"})
	}
	q := `query($after: String) { repositoryOwner(login: "acme") { login
	  repositories(first: 2, after: $after, ownerAffiliations: [OWNER], orderBy: {field: NAME, direction: ASC}) {
	    pageInfo { hasNextPage endCursor } nodes { name isArchived main: ref(qualifiedName: "refs/heads/main") { target { oid } } } } } }`
	out := graphQL(t, s, q, nil)
	require.Nil(t, out["errors"])
	repos := out["data"].(map[string]any)["repositoryOwner"].(map[string]any)["repositories"].(map[string]any)
	nodes := repos["nodes"].([]any)
	require.Len(t, nodes, 2)
	first := nodes[0].(map[string]any)
	assert.Equal(t, "repo-0", first["name"])
	assert.Equal(t, s.Branch("acme", "repo-0", "main"), first["main"].(map[string]any)["target"].(map[string]any)["oid"])
	page := repos["pageInfo"].(map[string]any)
	require.Equal(t, true, page["hasNextPage"])

	out = graphQL(t, s, q, map[string]any{"after": page["endCursor"]})
	repos = out["data"].(map[string]any)["repositoryOwner"].(map[string]any)["repositories"].(map[string]any)
	nodes = repos["nodes"].([]any)
	require.Len(t, nodes, 1)
	assert.Equal(t, "repo-2", nodes[0].(map[string]any)["name"])
	assert.Equal(t, false, repos["pageInfo"].(map[string]any)["hasNextPage"])
}

func TestGraphQLMissingRepositoryIsNullWithNotFound(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.CreateRepo("acme", "here", nil)
	out := graphQL(t, s, `query { a: repository(owner: "acme", name: "here") { name } b: repository(owner: "acme", name: "gone") { name } }`, nil)
	data := out["data"].(map[string]any)
	assert.Equal(t, "here", data["a"].(map[string]any)["name"])
	assert.Nil(t, data["b"], "a missing repository is null, the others answer")
	errs := out["errors"].([]any)
	require.Len(t, errs, 1)
	e := errs[0].(map[string]any)
	assert.Equal(t, "NOT_FOUND", e["type"])
	assert.Equal(t, []any{"b"}, e["path"])
	assert.Equal(t, "Could not resolve to a Repository with the name 'acme/gone'.", e["message"])
}

func TestGraphQLFirstIsRequiredAndBounded(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.CreateOrg("acme")
	out := graphQL(t, s, `query { repositoryOwner(login: "acme") { repositories(first: 101) { totalCount } } }`, nil)
	require.NotNil(t, out["errors"], "GitHub refuses more than 100 records a page")
	assert.Contains(t, fmt.Sprint(out["errors"]), "exceeds the `first` limit of 100 records")
}

// TestGraphQLQueryIsARead: GitHub counts a query like a GET (1 point) and a mutation like a
// write (5 points); the request log does the same, so "a no-op writes nothing" holds for
// batched reads.
func TestGraphQLQueryIsARead(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	s.CreateRepo("acme", "r", nil)
	s.ResetLog()
	graphQL(t, s, `query { repository(owner: "acme", name: "r") { name } }`, nil)
	graphQL(t, s, `mutation { enablePullRequestAutoMerge(input: {pullRequestId: "x"}) { clientMutationId } }`, nil)
	c := s.Counts()
	assert.Equal(t, 1, c.Reads)
	assert.Equal(t, 1, c.Writes)
}

// TestGraphQLValidatesAgainstGitHubSchema: with GitHub's published schema installed, a field
// GitHub does not have fails in the fake as it would on GitHub.
func TestGraphQLValidatesAgainstGitHubSchema(t *testing.T) {
	t.Parallel()
	RequireGraphQLSchema(t)
	s := NewServer(t)
	s.CreateRepo("acme", "r", nil)
	out := graphQL(t, s, `query { repository(owner: "acme", name: "r") { name archived } }`, nil)
	assert.Nil(t, out["data"])
	assert.Contains(t, fmt.Sprint(out["errors"]), `Cannot query field "archived" on type "Repository"`)
}

// TestGraphQLFakeAnswersOnlyWhatGitHubDescribes: every field the fake resolves exists in
// GitHub's schema with the same name on the same type, so the fake cannot accept a query that
// GitHub would refuse.
func TestGraphQLFakeAnswersOnlyWhatGitHubDescribes(t *testing.T) {
	t.Parallel()
	schema := RequireGraphQLSchema(t)
	q := `query($after: String) {
	  rateLimit { cost limit remaining used nodeCount }
	  repositoryOwner(login: "acme") { login id repositories(first: 100, after: $after, orderBy: {field: NAME, direction: ASC}) {
	    totalCount pageInfo { hasNextPage hasPreviousPage endCursor } edges { cursor node { name } }
	    nodes { id name nameWithOwner description isArchived isPrivate visibility url
	      repositoryTopics(first: 20) { nodes { topic { name } } }
	      defaultBranchRef { name prefix target { oid } }
	      ref(qualifiedName: "refs/heads/main") { name prefix target { oid } }
	      pullRequests(headRefName: "x", baseRefName: "main", first: 3, orderBy: {field: CREATED_AT, direction: DESC}, states: [OPEN, CLOSED, MERGED]) {
	        nodes { id number state title body url headRefName baseRefName headRefOid merged isCrossRepository isDraft } } } } }
	  organization(login: "acme") { login }
	  user(login: "octocat") { login }
	}`
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	require.NoError(t, err)
	require.Empty(t, validator.ValidateWithRules(schema, doc, nil))
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"a": "b"})
	out := graphQL(t, s, q, nil)
	assert.Nil(t, out["errors"], "the fake implements every field above")
}
