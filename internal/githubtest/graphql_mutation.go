package githubtest

import (
	"fmt"
	"strings"
)

// The GraphQL mutations the fake runs, through the same executor as queries: an answer carries
// exactly the fields the mutation selected.

// gqlTypedError is a field error GitHub reports with a type (UNPROCESSABLE, NOT_FOUND...) and a
// null value.
type gqlTypedError struct{ typ, msg string }

func (e *gqlTypedError) Error() string { return e.msg }

// gqlMutationRoot is the Mutation type; who is the caller; a mutation writing one repository
// records it in repo (nil: nowhere), for the request log (Request.Repo).
type gqlMutationRoot struct {
	s    *Server
	who  principal
	repo *string
}

func (m *gqlMutationRoot) typename() string { return "Mutation" }

func (m *gqlMutationRoot) field(name string, args map[string]any) (any, error) {
	input, _ := args["input"].(map[string]any)
	switch name {
	case "enablePullRequestAutoMerge":
		return m.enableAutoMerge(input)
	case "updateRefs":
		return m.updateRefs(input)
	}
	return nil, fmt.Errorf("fake github: Mutation.%s is not implemented", name)
}

// enableAutoMerge is enablePullRequestAutoMerge: it refuses, with GitHub's messages, a pull
// request that is not open, one whose repository does not allow auto-merge or the merge
// method, one already mergeable (autoMergeRefusalLocked), and one whose head is not
// expectedHeadOid when given; else it records auto-merge with the method (MERGE by default).
// https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge
func (m *gqlMutationRoot) enableAutoMerge(input map[string]any) (any, error) {
	id := str(input["pullRequestId"])
	method := str(input["mergeMethod"])
	if method == "" {
		method = "MERGE" // GitHub's default mergeMethod
	}
	for _, rm := range m.s.st.Repos {
		for _, is := range rm.Issues {
			if is.Pull == nil || nodeID("PullRequest", is.ID) != id || !m.who.inScope(rm) {
				continue
			}
			rest := map[string]string{"MERGE": "merge", "SQUASH": "squash", "REBASE": "rebase"}[method]
			switch {
			case is.State != "open":
				return nil, &gqlTypedError{"UNPROCESSABLE", "Pull request is not in the correct state to enable auto-merge"}
			case mergeMethodRefusal(rm, rest) != "":
				return nil, &gqlTypedError{"UNPROCESSABLE", "Pull request " + mergeMethodRefusal(rm, rest)}
			}
			if msg := m.s.autoMergeRefusalLocked(rm, is); msg != "" {
				return nil, &gqlTypedError{"UNPROCESSABLE", msg}
			}
			if want := str(input["expectedHeadOid"]); want != "" && want != is.Pull.HeadSHA {
				// GitHub does not document this message.
				return nil, &gqlTypedError{"UNPROCESSABLE", "Pull request head ref has been modified since expectedHeadOid"}
			}
			is.Pull.AutoMerge, is.Pull.AutoMergeMethod = true, rest
			is.Pull.AutoMergeAt, is.Pull.AutoMergeBy = m.s.clock.Now(), m.who.login
			repo := &gqlRepo{s: m.s, rm: rm}
			return &gqlPlain{name: "EnablePullRequestAutoMergePayload", fields: map[string]any{
				"clientMutationId": nilIfEmpty(str(input["clientMutationId"])),
				"pullRequest":      repo.pull(is),
				"actor":            m.s.actorObject(m.who.login),
			}}, nil
		}
	}
	return nil, &gqlTypedError{"NOT_FOUND", "Could not resolve to a node with the global id of '" + id + "'"}
}

// autoMergeRequest is a pull request's PullRequest.autoMergeRequest: null unless auto-merge is
// enabled.
func (r *gqlRepo) autoMergeRequest(is *issue) gqlObject {
	if !is.Pull.AutoMerge {
		return nil
	}
	method := strings.ToUpper(is.Pull.AutoMergeMethod)
	if method == "" {
		method = "MERGE"
	}
	at := is.Pull.AutoMergeAt
	if at.IsZero() {
		at = is.UpdatedAt
	}
	return &gqlPlain{name: "AutoMergeRequest", fields: map[string]any{
		"enabledAt": gqlDateTime(at), "mergeMethod": method, "enabledBy": r.s.actorObject(is.Pull.AutoMergeBy),
	}}
}

// actorObject is an Actor (a User or a Bot) of the graph; null for no login.
func (s *Server) actorObject(login string) gqlObject {
	if login == "" {
		return nil
	}
	typ := "User"
	if a := s.st.Accounts[strings.ToLower(login)]; a != nil && a.Type == "Bot" {
		typ = "Bot"
	}
	return &gqlPlain{name: typ, fields: map[string]any{"login": login}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
