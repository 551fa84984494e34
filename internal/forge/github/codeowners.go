package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// codeownersCheck is the last CODEOWNERS errors check of a repo, kept in its snapshot state
// (and so in the disk cache): the answer stands while the CODEOWNERS blob and the repo's
// access (which decides whether a team is a valid owner) are unchanged, so a no-op run does
// not pay one more read per repo.
type codeownersCheck struct {
	Blob   string                   `json:"blob"`
	Access string                   `json:"access"`
	Errors []policy.CodeownersError `json:"errors,omitempty"`
}

// CodeownersErrors implements reconcile.CodeownersChecker: GitHub's own check of the
// CODEOWNERS on the default branch (unknown teams and users, owners without write access,
// unsupported patterns). blob is the file's git hash and access the repo's access; while both
// are those of the last check, its answer is reused without a request. A repo without a
// CODEOWNERS file has no errors.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#list-codeowners-errors
func (f *Forge) CodeownersErrors(ctx context.Context, owner, repo, blob string, access policy.Access) ([]policy.CodeownersError, error) {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	fp := accessFingerprint(access)
	if c := st.Codeowners; c != nil && c.Blob == blob && c.Access == fp {
		return append([]policy.CodeownersError(nil), c.Errors...), nil
	}
	res, _, err := f.api.Repositories.GetCodeownersErrors(ctx, owner, repo, nil)
	if err != nil && !IsNotFound(err) {
		return nil, errf(err, "reading the CODEOWNERS errors of", owner+"/"+repo)
	}
	var out []policy.CodeownersError
	if res != nil {
		for _, ce := range res.Errors {
			out = append(out, policy.CodeownersError{Path: ce.Path, Line: ce.Line, Kind: ce.Kind, Message: codeownersMessage(ce)})
		}
	}
	st.Codeowners = &codeownersCheck{Blob: blob, Access: fp, Errors: out}
	f.saveState(owner, repo, st)
	return append([]policy.CodeownersError(nil), out...), nil
}

// codeownersMessage keeps the first line of GitHub's message without its "Kind on line N: "
// prefix: the rest repeats the source line with a caret, which Line and Path already say.
// GitHub often says nothing after the prefix ("Invalid owner on line 7:", its documented
// example): then the message names the offending text and its column.
func codeownersMessage(ce *gh.CodeownersError) string {
	first, _, _ := strings.Cut(ce.Message, "\n")
	first = strings.TrimSpace(first)
	if k, rest, ok := strings.Cut(first, ":"); ok && strings.HasPrefix(k, ce.Kind+" on line ") {
		first = strings.TrimSpace(rest)
	}
	if first != "" {
		return first
	}
	if ce.Column > 0 && ce.Column <= len(ce.Source) {
		token, _, _ := strings.Cut(ce.Source[ce.Column-1:], " ")
		return fmt.Sprintf("%q at column %d of %q", token, ce.Column, ce.Source)
	}
	return fmt.Sprintf("%q", ce.Source)
}

// accessFingerprint identifies the parts of an access that decide whether a CODEOWNERS owner
// is valid: team roles and direct collaborators.
func accessFingerprint(a policy.Access) string {
	var parts []string
	for k, v := range a.Teams {
		parts = append(parts, "team "+strings.ToLower(k)+"="+string(v))
	}
	for k, v := range a.Collaborators {
		parts = append(parts, "user "+strings.ToLower(k)+"="+string(v))
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:8])
}
