package githubtest

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// zeroOID is git's null object id: as updateRefs' beforeOid it asks that the ref not exist, as
// its afterOid it deletes the ref.
const zeroOID = "0000000000000000000000000000000000000000"

// updateRefs is GitHub's updateRefs mutation: "Creates, updates and/or deletes multiple refs in
// a repository. [...] All updates are performed atomically, meaning that if one of them is
// rejected, no other ref will be modified. RefUpdate.beforeOid specifies that the given
// reference needs to point to the given value before performing any updates. A value of
// 0000000000000000000000000000000000000000 can be used to verify that the references should not
// exist. RefUpdate.afterOid specifies the value that the given reference will point to after
// performing all updates. A value of 0000000000000000000000000000000000000000 can be used to
// delete a reference. If RefUpdate.force is set to true, a non-fast-forward updates for the
// given reference will be allowed." Every update is checked before any is applied.
//
// GitHub does not document the error of a refused update; the fake answers it as GitHub is
// reported to (a field error with no type, the field null: github.com/orgs/community
// discussion 213655), in words of its own.
// https://docs.github.com/graphql/reference/mutations#updaterefs
func (m *gqlMutationRoot) updateRefs(input map[string]any) (any, error) {
	s := m.s
	id := str(input["repositoryId"])
	var rm *repoMeta
	for _, r := range s.st.Repos {
		if nodeID("Repository", r.ID) == id && m.who.inScope(r) {
			rm = r
		}
	}
	if rm == nil {
		return nil, &gqlTypedError{"NOT_FOUND", "Could not resolve to a node with the global id of '" + id + "'"}
	}
	if m.repo != nil {
		*m.repo = rm.fullName()
	}
	if rm.Archived {
		return nil, &gqlTypedError{"FORBIDDEN", "Repository was archived so is read-only."} // wording not documented
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return nil, err
	}
	updates, _ := input["refUpdates"].([]any)
	var changes []refChange
	for _, u := range updates {
		ch, err := checkRefUpdate(g, u)
		if err != nil {
			return nil, err
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		if ch.after.IsZero() {
			err = g.deleteRef(ch.name)
		} else {
			err = g.setRef(ch.name, ch.after)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.refsChangedLocked(rm, g, changes, m.who.login); err != nil {
		return nil, err
	}
	return &gqlPlain{name: "UpdateRefsPayload", fields: map[string]any{
		"clientMutationId": nilIfEmpty(str(input["clientMutationId"])),
	}}, nil
}

// checkRefUpdate checks one RefUpdate against the repository as it is, and returns the change
// it makes.
func checkRefUpdate(g *gitRepo, u any) (refChange, error) {
	m, _ := u.(map[string]any)
	name, before, after := str(m["name"]), str(m["beforeOid"]), str(m["afterOid"])
	force, _ := m["force"].(bool)
	if !validRefName(name) {
		return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: %q is not a valid ref name", name)) // wording not documented
	}
	cur, exists := g.ref(name)
	ch := refChange{name: name, before: cur, how: refHow{"graphql", GuardNone}}
	if !exists {
		ch.before = plumbing.ZeroHash
	}
	switch {
	case before != "":
		ch.how.guard = GuardExpected
		if !isSHA(before) && before != zeroOID {
			return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: beforeOid %q is not an object id", before))
		}
		if plumbing.NewHash(before) != ch.before {
			return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: %s is at %s, not at the beforeOid %s", name, oidOrZero(ch.before), before))
		}
	case !force:
		ch.how.guard = GuardFastForward
	}
	if after == zeroOID {
		if !exists {
			return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: %s does not exist", name))
		}
		return ch, nil
	}
	h := plumbing.NewHash(after)
	if t, ok := g.objectType(h); !isSHA(after) || !ok || (strings.HasPrefix(name, "refs/heads/") && t != plumbing.CommitObject) {
		return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: object %s does not exist", after))
	}
	if exists && !force && !g.isAncestor(cur, h) {
		return refChange{}, githubError(fmt.Sprintf("A ref update was rejected: %s: Update is not a fast forward", name))
	}
	ch.after = h
	return ch, nil
}

func oidOrZero(h plumbing.Hash) string {
	if h.IsZero() {
		return zeroOID
	}
	return h.String()
}

// withoutUpdateRefs answers a GraphQL document naming updateRefs as a GitHub Enterprise Server
// whose schema lacks the mutation does (WithoutUpdateRefs): "Field 'updateRefs' doesn't exist on
// type 'Mutation'", extensions code undefinedField, as graphql-ruby words it. It reports whether
// it answered.
func (s *Server) withoutUpdateRefs(w http.ResponseWriter, query string) bool {
	if !s.cfg.noUpdateRefs || !strings.Contains(query, "updateRefs") {
		return false
	}
	writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]any{{
		"path":       []string{"mutation", "updateRefs"},
		"extensions": map[string]any{"code": "undefinedField", "typeName": "Mutation", "fieldName": "updateRefs"},
		"message":    "Field 'updateRefs' doesn't exist on type 'Mutation'",
	}}})
	return true
}
