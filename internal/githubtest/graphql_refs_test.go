package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const updateRefsDoc = `mutation($repo: ID!, $updates: [RefUpdate!]!) { updateRefs(input: {repositoryId: $repo, refUpdates: $updates}) { clientMutationId } }`

// refsRepo makes acme/r with main at base and branch x one commit ahead of it (next), and
// returns the repository's node id.
func refsRepo(t *testing.T, s *Server) (id, base, next string) {
	t.Helper()
	s.CreateRepo("acme", "r", map[string]string{"a.txt": "a\n"})
	base = s.Branch("acme", "r", "main")
	_, _, err := s.Client().Git.CreateRef(context.Background(), "acme", "r", &github.Reference{Ref: github.String("refs/heads/x"), Object: &github.GitObject{SHA: &base}})
	require.NoError(t, err)
	next = s.Commit("acme", "r", "x", "x", map[string]string{"b.txt": "b\n"})
	r, _, err := s.Client().Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err)
	return r.GetNodeID(), base, next
}

func update(name, before, after string, force bool) map[string]any {
	u := map[string]any{"name": name, "afterOid": after, "force": force}
	if before != "" {
		u["beforeOid"] = before
	}
	return u
}

// TestUpdateRefsEnforcesBeforeOid: updateRefs moves a ref only while it points at beforeOid
// (the zero id: only while it does not exist); a stale beforeOid is a field error without a
// type, the field null, and nothing moved. Every update of a call is checked before any is
// applied ("all updates are performed atomically"), a non-fast-forward needs force, and the
// zero afterOid deletes. Each move is in the ref-move log with its before, after, actor and
// guard.
func TestUpdateRefsEnforcesBeforeOid(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	id, base, next := refsRepo(t, s)
	s.ResetRefMoves()
	run := func(updates ...map[string]any) map[string]any {
		t.Helper()
		return graphQL(t, s, updateRefsDoc, map[string]any{"repo": id, "updates": updates})
	}

	// Stale: x is at next, not base.
	out := run(update("refs/heads/x", base, base, true))
	errs, _ := out["errors"].([]any)
	require.Len(t, errs, 1, "%v", out)
	e := errs[0].(map[string]any)
	assert.NotContains(t, e, "type", "GitHub reports a refused update without a type")
	assert.Equal(t, []any{"updateRefs"}, e["path"])
	assert.Contains(t, e["message"], "refs/heads/x is at "+next)
	assert.Nil(t, out["data"].(map[string]any)["updateRefs"])
	assert.Equal(t, next, s.Branch("acme", "r", "x"), "nothing moved")

	// Atomic: one stale update, the other fine: neither applies.
	out = run(update("refs/heads/main", base, next, false), update("refs/heads/x", base, base, true))
	require.NotNil(t, out["errors"])
	assert.Equal(t, base, s.Branch("acme", "r", "main"), "the good update was not applied either")

	// Must not exist: zero beforeOid on an existing ref is refused, on a new one creates it.
	require.NotNil(t, run(update("refs/heads/x", zeroOID, base, true))["errors"])
	require.Nil(t, run(update("refs/heads/y", zeroOID, base, false))["errors"])
	assert.Equal(t, base, s.Branch("acme", "r", "y"))

	// A non-fast-forward needs force, with or without beforeOid.
	out = run(update("refs/heads/x", next, base, false))
	require.NotNil(t, out["errors"])
	assert.Contains(t, out["errors"].([]any)[0].(map[string]any)["message"], "Update is not a fast forward")
	require.Nil(t, run(update("refs/heads/x", next, base, true))["errors"])
	assert.Equal(t, base, s.Branch("acme", "r", "x"))

	// The zero afterOid deletes, while the ref is at beforeOid.
	require.NotNil(t, run(update("refs/heads/y", next, zeroOID, true))["errors"])
	require.Nil(t, run(update("refs/heads/y", base, zeroOID, true))["errors"])
	assert.Empty(t, s.Branch("acme", "r", "y"))

	// No beforeOid and force: last writer wins, and the log says so.
	require.Nil(t, run(update("refs/heads/x", "", next, true))["errors"])

	moves := s.RefMoves()
	require.Len(t, moves, 4)
	want := []RefMove{
		{Repo: "acme/r", Ref: "refs/heads/y", Before: "", After: base, Actor: DefaultUser, Via: "graphql", Guard: GuardExpected},
		{Repo: "acme/r", Ref: "refs/heads/x", Before: next, After: base, Actor: DefaultUser, Via: "graphql", Guard: GuardExpected},
		{Repo: "acme/r", Ref: "refs/heads/y", Before: base, After: "", Actor: DefaultUser, Via: "graphql", Guard: GuardExpected},
		{Repo: "acme/r", Ref: "refs/heads/x", Before: base, After: next, Actor: DefaultUser, Via: "graphql", Guard: GuardNone},
	}
	for i := range moves {
		moves[i].Time = want[i].Time
	}
	assert.Equal(t, want, moves)
	// The request log names the repository a mutation wrote, as it does a REST call's.
	n := 0
	for _, r := range s.Requests() {
		if r.Route == "POST /api/graphql" {
			n++
			assert.Equal(t, "acme/r", r.Repo)
		}
	}
	assert.Positive(t, n)
}

// TestUpdateRefsNeedsContentsWrite: an installation token moves refs with updateRefs only with
// the contents: write permission, as with the REST ref endpoints; a token narrowed to other
// repositories cannot resolve the repository's node id.
func TestUpdateRefsNeedsContentsWrite(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithAppPermissions(map[string]string{"metadata": "read", "contents": "read", "pull_requests": "write"}))
	s.CreateOrg("acme")
	id, base, _ := refsRepo(t, s)
	tok := s.InstallationToken("acme")
	body, err := json.Marshal(map[string]any{"query": updateRefsDoc, "variables": map[string]any{"repo": id,
		"updates": []map[string]any{update("refs/heads/z", zeroOID, base, false)}}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/api/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, s.Branch("acme", "r", "z"))
}

// TestWithoutUpdateRefs: a GitHub whose GraphQL schema lacks updateRefs answers a document
// naming it as graphql-ruby does, and moves nothing.
func TestWithoutUpdateRefs(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithoutUpdateRefs())
	id, base, next := refsRepo(t, s)
	out := graphQL(t, s, updateRefsDoc, map[string]any{"repo": id, "updates": []map[string]any{update("refs/heads/x", next, base, true)}})
	errs := out["errors"].([]any)
	require.Len(t, errs, 1)
	e := errs[0].(map[string]any)
	assert.Equal(t, "Field 'updateRefs' doesn't exist on type 'Mutation'", e["message"])
	assert.Equal(t, "undefinedField", e["extensions"].(map[string]any)["code"])
	assert.NotContains(t, out, "data")
	assert.Equal(t, next, s.Branch("acme", "r", "x"))
}

// TestRefMovesLogsEveryDoor: the ref-move log records the moves of every writer with the guard
// it used: a forced PATCH names no head, a non-forced one is a fast-forward, a created ref
// names "absent", a test helper's commit is the server's own.
func TestRefMovesLogsEveryDoor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	_, base, next := refsRepo(t, s)
	s.ResetRefMoves()
	c := s.Client()
	_, _, err := c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/n"), Object: &github.GitObject{SHA: &base}})
	require.NoError(t, err)
	_, _, err = c.Git.UpdateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/n"), Object: &github.GitObject{SHA: &next}}, false)
	require.NoError(t, err)
	_, _, err = c.Git.UpdateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/n"), Object: &github.GitObject{SHA: &base}}, true)
	require.NoError(t, err)
	_, err = c.Git.DeleteRef(ctx, "acme", "r", "refs/heads/n")
	require.NoError(t, err)
	third := s.Commit("acme", "r", "main", "three", map[string]string{"c.txt": "c\n"})

	var got []string
	for _, m := range s.RefMoves() {
		got = append(got, m.Via+" "+m.Ref+" "+short7(m.Before)+".."+short7(m.After)+" "+string(m.Guard)+" by "+m.Actor)
	}
	assert.Equal(t, []string{
		"rest refs/heads/n .." + short7(base) + " expected by " + DefaultUser,
		"rest refs/heads/n " + short7(base) + ".." + short7(next) + " fast-forward by " + DefaultUser,
		"rest refs/heads/n " + short7(next) + ".." + short7(base) + " none by " + DefaultUser,
		"rest refs/heads/n " + short7(base) + ".. none by " + DefaultUser,
		"setup refs/heads/main " + short7(base) + ".." + short7(third) + " server by " + DefaultUser,
	}, got)
}

func short7(h string) string { return h[:min(len(h), 7)] }
