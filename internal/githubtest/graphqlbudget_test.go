package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// graphQLResponse posts a query and returns the raw response, its body decoded.
func graphQLResponse(t *testing.T, s *Server, query string, vars map[string]any) (*http.Response, map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/api/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "bearer "+DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp, out
}

// TestGraphQLCostAsDocumented: a call's score is the requests its connections need (each asked
// once per node of the connections around it), divided by 100 and rounded, at least 1;
// nodeCount the nodes it may return. The figures are GitHub's own worked examples.
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api
func TestGraphQLCostAsDocumented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query         string
		points, nodes int
	}{
		// "Calculating a rate limit score": 1 + 100 + 5,000 requests = 5,101 -> 51 points.
		{`query { viewer { login repositories(first: 100) { edges { node { id issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } } }`, 51, 100 + 100*50 + 100*50*60},
		// "Calculating nodes in a call", the simple query: 550 nodes.
		{`query { viewer { repositories(first: 50) { edges { repository:node { name issues(first: 10) { totalCount edges { node { title bodyHTML } } } } } } } }`, 1, 550},
		// The complex query: 22,060 nodes; 1 + 50 + 1,000 + 50 + 1,000 + 1 = 2,102 requests.
		{`query { viewer { repositories(first: 50) { edges { repository:node { name pullRequests(first: 20) { edges { pullRequest:node { title comments(first: 10) { edges { comment:node { bodyHTML } } } } } } issues(first: 20) { totalCount edges { issue:node { title bodyHTML comments(first: 10) { edges { comment:node { bodyHTML } } } } } } } } } followers(first: 10) { edges { follower:node { login } } } } }`, 21, 22060},
		// A variable page size counts as given.
		{`query($n: Int!) { viewer { repositories(first: $n) { nodes { pullRequests(first: 100) { totalCount } } } } }`, 1, 100 + 100*100},
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: tc.query})
		require.NoError(t, err)
		got := costOf(doc, doc.Operations[0], map[string]any{"n": float64(100)})
		assert.Equal(t, tc.points, got.points, tc.query)
		assert.Equal(t, tc.nodes, got.nodes, tc.query)
	}
}

// TestGraphQLBudgetApartFromREST: a GraphQL call spends the GraphQL budget (x-ratelimit-resource:
// graphql), not the REST one; rateLimit answers the call's cost and the budget after it;
// rateLimit(dryRun: true) spends nothing; GET /rate_limit shows both budgets. Over budget a call
// is answered 200 with a RATE_LIMITED error and x-ratelimit-remaining: 0, and REST calls go on.
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api
func TestGraphQLBudgetApartFromREST(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithGraphQLLimit(3))
	s.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	const q = `query { rateLimit { cost limit remaining used resetAt nodeCount } repository(owner: "acme", name: "r") { name } }`

	resp, out := graphQLResponse(t, s, q, nil)
	assert.Equal(t, "graphql", resp.Header.Get("X-Ratelimit-Resource"))
	assert.Equal(t, "2", resp.Header.Get("X-Ratelimit-Remaining"))
	rl := out["data"].(map[string]any)["rateLimit"].(map[string]any)
	assert.Equal(t, 1.0, rl["cost"])
	assert.Equal(t, 3.0, rl["limit"])
	assert.Equal(t, 2.0, rl["remaining"], "after this call")
	assert.Equal(t, 1.0, rl["used"])
	assert.Equal(t, 0.0, rl["nodeCount"])
	assert.NotEmpty(t, rl["resetAt"])

	_, out = graphQLResponse(t, s, `query { rateLimit(dryRun: true) { cost remaining } }`, nil)
	assert.Equal(t, map[string]any{"cost": 1.0, "remaining": 2.0}, out["data"].(map[string]any)["rateLimit"], "a dry run spends nothing")

	limits, _, err := s.Client().RateLimit.Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, limits.GetGraphQL().Remaining)
	assert.Equal(t, 5000, limits.GetCore().Remaining, "GraphQL calls spend no REST budget")

	graphQLResponse(t, s, q, nil)
	graphQLResponse(t, s, q, nil)
	resp, out = graphQLResponse(t, s, q, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("X-Ratelimit-Remaining"))
	assert.Nil(t, out["data"])
	assert.Equal(t, "RATE_LIMITED", out["errors"].([]any)[0].(map[string]any)["type"])
	_, _, err = s.Client().Repositories.Get(context.Background(), "acme", "r")
	assert.NoError(t, err, "the REST budget is untouched")
	reset, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64)
	require.NoError(t, err)
	assert.Positive(t, reset)
}

// selectedKeys lists the keys a selection set asks of an object of typename (aliases, and
// fragments whose type condition matches), in order.
func selectedKeys(doc *ast.QueryDocument, set ast.SelectionSet, typename string) []string {
	var keys []string
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			k := sel.Alias
			if k == "" {
				k = sel.Name
			}
			keys = append(keys, k)
		case *ast.InlineFragment:
			if sel.TypeCondition == "" || sel.TypeCondition == typename {
				keys = append(keys, selectedKeys(doc, sel.SelectionSet, typename)...)
			}
		case *ast.FragmentSpread:
			if f := doc.Fragments.ForName(sel.Name); f != nil && f.TypeCondition == typename {
				keys = append(keys, selectedKeys(doc, f.SelectionSet, typename)...)
			}
		}
	}
	return keys
}

// assertExactlySelected checks that an answer carries exactly the fields the selection asks,
// at every level (typename is tracked through __typename, which each object selects).
func assertExactlySelected(t *testing.T, doc *ast.QueryDocument, set ast.SelectionSet, v any, path string) {
	t.Helper()
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			assertExactlySelected(t, doc, set, e, path+"["+strconv.Itoa(i)+"]")
		}
	case map[string]any:
		typename, _ := v["__typename"].(string)
		want := selectedKeys(doc, set, typename)
		sort.Strings(want)
		var got []string
		for k := range v {
			got = append(got, k)
		}
		sort.Strings(got)
		assert.Equal(t, dedupe(want), got, "fields at %s", path)
		for _, sel := range set {
			f, ok := sel.(*ast.Field)
			if !ok || f.SelectionSet == nil {
				continue
			}
			k := f.Alias
			if k == "" {
				k = f.Name
			}
			assertExactlySelected(t, doc, f.SelectionSet, v[k], path+"."+k)
		}
	}
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// TestGraphQLAnswersExactlyTheSelection: a query's and a mutation's answers carry the fields
// they selected (aliases and fragments included) and nothing else: GitHub answers the
// selection, and the mutation's answer once carried a pull request the mutation had not asked.
// https://docs.github.com/graphql/guides/forming-calls-with-graphql
func TestGraphQLAnswersExactlyTheSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	RequireGraphQLSchema(t)
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	s.Commit("acme", "r", "topic", "change", map[string]string{"x": "1\n"})
	c := s.Client()
	p, _, err := c.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	_, _, err = c.Repositories.Edit(ctx, "acme", "r", &github.Repository{AllowAutoMerge: github.Bool(true)})
	require.NoError(t, err)
	_, _, err = c.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1}})
	require.NoError(t, err)

	for _, tc := range []struct {
		query string
		vars  map[string]any
	}{
		{`query { __typename owner: repositoryOwner(login: "acme") { __typename login ... on Organization { __typename id } repositories(first: 10) { __typename totalCount nodes { __typename name ...pr } pageInfo { __typename hasNextPage } } } }
		  fragment pr on Repository { prs: pullRequests(first: 1, states: [OPEN]) { __typename nodes { __typename number headRefOid autoMergeRequest { __typename mergeMethod } } } }`, nil},
		{`mutation($id: ID!) { __typename enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: SQUASH}) { __typename pullRequest { __typename number } } }`,
			map[string]any{"id": p.GetNodeID()}},
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: tc.query})
		require.NoError(t, err)
		out := graphQL(t, s, tc.query, tc.vars)
		require.Nil(t, out["errors"], tc.query)
		assertExactlySelected(t, doc, doc.Operations[0].SelectionSet, out["data"], "data")
	}
}
