package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Every move of a branch names the head it replaces (DESIGN §8): a compare-and-swap, so that a
// commit someone pushed after fleetbot read the branch is never discarded, whichever replica
// or process writes. Per kind of move:
//
//   - create (the caller read no branch): POST git/refs, which GitHub refuses while the ref
//     exists (422 "Reference already exists");
//   - move or delete (the caller read a head): the GraphQL mutation updateRefs with beforeOid,
//     which GitHub applies only while the ref points there (force lets the move be a
//     non-fast-forward: the bot branch is rebuilt on a moved default branch);
//   - where the instance's GraphQL schema has no updateRefs (a GitHub Enterprise Server whose
//     schema lacks it): one git push over HTTPS whose command names the old value, which git's
//     receive-pack checks under the ref's lock: the lease of ContentTransportGit, with no
//     objects to send (the commit is GitHub's already).
//
// A refused compare-and-swap is an error wrapping pr.ErrRefMoved. GitHub does not document how
// updateRefs words a stale beforeOid, so fleetbot never matches its words: on any error in the
// answer it reads the branch (one GET) and decides from where the branch is.
//
// GitHub API docs: https://docs.github.com/rest/git/refs#create-a-reference,
// https://docs.github.com/graphql/reference/mutations#updaterefs

// updateRefsPreview is the media type of GitHub's "Update refs preview": the schema previews
// page of GitHub Enterprise Server (and Enterprise Cloud) lists Mutation.updateRefs, RefUpdate
// and GitRefname under it. Sent with every updateRefs call; where the mutation is out of
// preview the media type changes nothing.
// https://docs.github.com/graphql/overview/schema-previews
const updateRefsPreview = "application/vnd.github.update-refs-preview+json"

// zeroOID is git's null object id: as updateRefs' afterOid it deletes the ref.
const zeroOID = "0000000000000000000000000000000000000000"

// updateRefsMutation moves refs of one repository, all or none.
const updateRefsMutation = `mutation($repo: ID!, $updates: [RefUpdate!]!) { updateRefs(input: {repositoryId: $repo, refUpdates: $updates}) { clientMutationId } }`

// moveBranch moves branch of owner/repo from expect ("" absent) to sha ("" deletes it), as a
// compare-and-swap: see the comment at the top of this file. A branch already at sha (an answer
// that was lost) is no error; a deleted branch already gone neither.
func (f *Forge) moveBranch(ctx context.Context, owner, repo string, e *repoEntry, branch, sha, expect string) error {
	if expect == "" {
		if sha == "" {
			return nil
		}
		return f.createBranch(ctx, owner, repo, e, branch, sha)
	}
	if f.noUpdateRefs.Load() {
		return f.leaseMove(ctx, owner, repo, e, branch, sha, expect)
	}
	return f.updateRef(ctx, owner, repo, e, branch, sha, expect)
}

// createBranch creates branch at sha with POST git/refs; GitHub refuses it while the branch
// exists, which then was created by someone else since it was read (or by this very call, whose
// answer was lost: then it is at sha already).
func (f *Forge) createBranch(ctx context.Context, owner, repo string, e *repoEntry, branch, sha string) error {
	ref := &gh.Reference{Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(sha)}}
	_, resp, err := f.api.Git.CreateRef(ctx, owner, repo, ref)
	if err == nil {
		return nil
	}
	if statusOf(resp) != http.StatusUnprocessableEntity || !strings.Contains(strings.ToLower(errMessage(err)), "already exists") {
		return errf(err, "creating branch "+branch+" in", owner+"/"+repo)
	}
	return f.checkMoved(ctx, owner, repo, e, branch, sha, "", err)
}

// updateRef moves (or deletes) branch from expect with updateRefs and beforeOid.
func (f *Forge) updateRef(ctx context.Context, owner, repo string, e *repoEntry, branch, sha, expect string) error {
	full := owner + "/" + repo
	op := "moving branch " + branch + " in"
	after := sha
	if sha == "" {
		op, after = "deleting branch "+branch+" in", zeroOID
	}
	id, err := f.repoNodeID(ctx, owner, repo, e)
	if err != nil {
		return err
	}
	vars := map[string]any{"repo": id, "updates": []map[string]any{{
		"name": "refs/heads/" + branch, "beforeOid": expect, "afterOid": after, "force": true,
	}}}
	req, err := f.api.NewRequest(http.MethodPost, graphQLURL(f.api.BaseURL.String()), map[string]any{"query": updateRefsMutation, "variables": vars})
	if err != nil {
		return err
	}
	req.Header.Set("Accept", updateRefsPreview)
	if sha != "" {
		// A ref moved publishes commits: fleetbot's budget counts it as content creation, as
		// it counts the REST ref move and a push (kinds.go).
		ctx = withContentCreation(ctx)
	}
	var raw bytes.Buffer
	resp, err := f.postGraphQL(ctx, req, &raw)
	if err != nil {
		return errf(err, op, full)
	}
	var out struct {
		Errors []struct {
			Type       string `json:"type"`
			Message    string `json:"message"`
			Extensions struct {
				Code      string `json:"code"`
				FieldName string `json:"fieldName"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw.Bytes(), &out); err != nil {
		return fmt.Errorf("%s %s: GraphQL: decoding the answer: %w", op, full, err)
	}
	if len(out.Errors) == 0 {
		return nil
	}
	ge := out.Errors[0]
	switch {
	case ge.Type == "RATE_LIMITED":
		return errf(graphQLRateLimited(req, resp), op, full)
	case undefinedUpdateRefs(ge.Extensions.Code, ge.Extensions.FieldName, ge.Message):
		if !f.noUpdateRefs.Swap(true) {
			f.log.Info("this GitHub has no GraphQL updateRefs: branch moves go through git push with a lease", "answer", ge.Message)
		}
		return f.leaseMove(ctx, owner, repo, e, branch, sha, expect)
	case ge.Type == "NOT_FOUND":
		// The repository's node id is stale (a repository deleted and created again under
		// its name): read it again next time.
		st := e.state()
		e.nodeID, st.NodeID = "", ""
		f.saveState(owner, repo, st)
	}
	return f.checkMoved(ctx, owner, repo, e, branch, sha, expect, graphQLAnswer(ge.Type, ge.Message))
}

// undefinedUpdateRefs reports whether a GraphQL error says the schema has no updateRefs:
// GitHub (graphql-ruby) answers "Field 'updateRefs' doesn't exist on type 'Mutation'" with
// extensions.code "undefinedField".
func undefinedUpdateRefs(code, field, message string) bool {
	if code == "undefinedField" && field == "updateRefs" {
		return true
	}
	return strings.Contains(message, "'updateRefs'") && strings.Contains(message, "doesn't exist")
}

// graphQLAnswer is an error GitHub's GraphQL API answered a mutation with, classified by its
// type: FORBIDDEN needs a person (the App's permissions), anything else may pass.
func graphQLAnswer(typ, msg string) error {
	err := &graphQLError{Type: typ, Message: msg}
	if typ == "FORBIDDEN" {
		return report.Classify(err, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonForbidden})
	}
	return report.Classify(err, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError})
}

// checkMoved decides a refused branch write from where the branch is now (one GET): at sha, the
// write happened (its answer was lost, or this is a repeated call); anywhere but expect, someone
// moved it since it was read (pr.ErrRefMoved, and the repo's cached refs are dropped so that
// the next snapshot reads them); still at expect, GitHub refused for another reason, refusal.
func (f *Forge) checkMoved(ctx context.Context, owner, repo string, e *repoEntry, branch, sha, expect string, refusal error) error {
	full := owner + "/" + repo
	cur, err := f.branchHead(ctx, owner, repo, branch)
	switch {
	case err != nil:
		return fmt.Errorf("moving branch %s in %s failed (%w), and reading where it is failed too: %w", branch, full, refusal, err)
	case cur == sha:
		return nil
	case cur != expect:
		f.forgetRefs(owner, repo, e)
		return refMoved(full, branch, cur, expect)
	}
	return fmt.Errorf("moving branch %s in %s from %s: %w", branch, full, short(plumbing.NewHash(expect)), refusal)
}

// branchHead is where branch is on GitHub now ("" when it does not exist).
//
// GitHub API docs: https://docs.github.com/rest/git/refs#get-a-reference
func (f *Forge) branchHead(ctx context.Context, owner, repo, branch string) (string, error) {
	ref, _, err := f.api.Git.GetRef(ctx, owner, repo, "heads/"+branch)
	if IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", errf(err, "reading branch "+branch+" of", owner+"/"+repo)
	}
	return ref.GetObject().GetSHA(), nil
}

// forgetRefs drops what the forge knows of a repo's branch heads (the refs' ETag and the last
// scan's hint), so that the next Snapshot reads them from GitHub: the repo is planned again
// from a fresh snapshot after a lost compare-and-swap.
func (f *Forge) forgetRefs(owner, repo string, e *repoEntry) {
	st := e.state()
	st.RefsETag = ""
	e.hint = nil
	f.saveState(owner, repo, st)
}

// refMoved is the error of a branch found at cur ("" absent) where the caller read expect.
func refMoved(full, branch, cur, expect string) error {
	return fmt.Errorf("branch %s of %s is %s, not %s as fleetbot read it: someone moved it since, so fleetbot wrote nothing and plans the repo again: %w",
		branch, full, where(cur), where(expect), pr.ErrRefMoved)
}

// where says where a branch is: "at abc1234", or "absent".
func where(sha string) string {
	if sha == "" {
		return "absent"
	}
	return "at " + report.ShortSHA(sha)
}

// repoNodeID is the repository's GraphQL node id, which updateRefs names it by: from the last
// scan (it reads it with the heads, at no cost), the snapshot cache, or else one GET of the
// repository, remembered.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#get-a-repository
func (f *Forge) repoNodeID(ctx context.Context, owner, repo string, e *repoEntry) (string, error) {
	st := e.state()
	if e.nodeID == "" {
		e.nodeID = st.NodeID
	}
	if e.nodeID != "" {
		return e.nodeID, nil
	}
	r, _, err := f.api.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return "", errf(err, "reading the node id of", owner+"/"+repo)
	}
	if r.GetNodeID() == "" {
		return "", fmt.Errorf("reading the node id of %s: GitHub answered without one", owner+"/"+repo)
	}
	e.nodeID, st.NodeID = r.GetNodeID(), r.GetNodeID()
	f.saveState(owner, repo, st)
	return e.nodeID, nil
}

// leaseMove moves (or deletes) branch from expect to sha with one git push whose command names
// expect as the old value (git's receive-pack refuses it when the branch is elsewhere) and
// sends no object: sha is on GitHub already. A broken lease is pr.ErrRefMoved; a push refused
// for another reason (a protected branch, a token that may not push over git, the network) is
// an error: there is no unconditional move to fall back to.
func (f *Forge) leaseMove(ctx context.Context, owner, repo string, e *repoEntry, branch, sha, expect string) error {
	full := owner + "/" + repo
	next := plumbing.ZeroHash
	if sha != "" {
		next = plumbing.NewHash(sha)
	}
	err := f.pushRef(ctx, owner, repo, branch, plumbing.NewHash(expect), next, nil)
	var lease *leaseError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &lease) && hashString(lease.now) == sha:
		return nil // moved (or deleted) already
	case errors.As(err, &lease):
		f.forgetRefs(owner, repo, e)
		return refMoved(full, branch, hashString(lease.now), expect)
	}
	return fmt.Errorf("moving branch %s of %s with a git push (this GitHub has no GraphQL updateRefs, and fleetbot never moves a branch without naming the head it replaces): %w",
		branch, full, err)
}

// hashString is h in hex, "" for the zero hash.
func hashString(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}

// contentKey marks a GraphQL mutation that creates content (a ref moved), for kindOf.
type contentKey struct{}

// withContentCreation marks the requests sent with ctx as content-creating.
func withContentCreation(ctx context.Context) context.Context {
	return context.WithValue(ctx, contentKey{}, true)
}
