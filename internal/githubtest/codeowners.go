package githubtest

import (
	"fmt"
	"regexp"
	"strings"
)

// The CODEOWNERS check of GET /repos/{owner}/{repo}/codeowners/errors, written from GitHub's
// documentation and its documented example answer, not from fleetbot's own check
// (internal/policy), so that a test can tell the product wrong:
// https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/about-code-owners
// https://docs.github.com/rest/repos/repos#list-codeowners-errors
//
//   - "A CODEOWNERS file uses a pattern that follows most of the same rules used in gitignore
//     files": a line whose first non-blank character is # is a comment (as in gitignore, a #
//     later in the line is not);
//   - "Escaping a pattern starting with # using \ so it is treated as a pattern and not a
//     comment doesn't work", nor "Using ! to negate a pattern", nor "Using [ ] to define a
//     character range": each is an invalid pattern; so is *** (the documented example, with
//     its suggestion);
//   - owners are "@username", "@org/team-name" or "an email address"; anything else is an
//     invalid owner (the documented example: "docs@");
//   - "The people you choose as code owners must have write permissions for the repository.
//     When the code owner is a team, that team must be visible and it must have write
//     permissions, even if all the individual members of the team already have write
//     permissions": any other is an unknown owner.

// codeownersError is one entry of the answer; suggestion is null unless GitHub has one.
type codeownersError struct {
	Line       int     `json:"line"`
	Column     int     `json:"column"`
	Kind       string  `json:"kind"`
	Source     string  `json:"source"`
	Suggestion *string `json:"suggestion"`
	Message    string  `json:"message"`
	Path       string  `json:"path"`
}

var (
	userOwnerRe  = regexp.MustCompile(`^@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\[bot\])?$`)
	teamOwnerRe  = regexp.MustCompile(`^@([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9][A-Za-z0-9_.-]*)$`)
	emailOwnerRe = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	stars3Re     = regexp.MustCompile(`\*{3,}`)
)

// codeownersErrors checks the CODEOWNERS file at path of repository rm.
func (s *Server) codeownersErrors(rm *repoMeta, path, content string) []codeownersError {
	out := []codeownersError{}
	add := func(line, col int, kind, source, suggestion string) {
		msg := kind + " on line " + fmt.Sprint(line) + ":"
		e := codeownersError{Line: line, Column: col, Kind: kind, Source: source, Path: path}
		if suggestion != "" {
			msg += " " + suggestion
			e.Suggestion = &suggestion
		}
		e.Message = fmt.Sprintf("%s\n\n  %s\n  %s^", msg, source, strings.Repeat(" ", col-1))
		out = append(out, e)
	}
	for i, source := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(source)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		fields := strings.Fields(source)
		pattern := fields[0]
		col := strings.Index(source, pattern) + 1
		switch {
		case strings.HasPrefix(pattern, `\#`), strings.HasPrefix(pattern, "!"):
			add(n, col, "Invalid pattern", source, "")
			continue
		case strings.ContainsAny(pattern, "[]"):
			add(n, col+strings.IndexAny(pattern, "[]"), "Invalid pattern", source, "")
			continue
		case stars3Re.MatchString(pattern):
			add(n, col, "Invalid pattern", source, "Did you mean `"+stars3Re.ReplaceAllString(pattern, "**")+"`?")
			continue
		}
		from := col + len(pattern) - 1
		for _, owner := range fields[1:] {
			at := strings.Index(source[from:], owner) + from
			from = at + len(owner)
			switch {
			case teamOwnerRe.MatchString(owner):
				m := teamOwnerRe.FindStringSubmatch(owner)
				if !s.teamCanOwnLocked(rm, m[1], m[2]) {
					add(n, at+1, "Unknown owner", source, "make sure the team "+owner+" exists, is publicly visible, and has write access to the repository")
				}
			case userOwnerRe.MatchString(owner):
				if !s.userCanOwnLocked(rm, owner[1:]) {
					add(n, at+1, "Unknown owner", source, "make sure "+owner+" exists and has write access to the repository")
				}
			case emailOwnerRe.MatchString(owner):
				// An address of an account: accepted (the fake has no e-mail addresses).
			default:
				add(n, at+1, "Invalid owner", source, "")
			}
		}
	}
	return out
}

// writeAccess is GitHub's "write permissions" on a repository: write (push), maintain or admin.
func writeAccess(perm string) bool { return perm == "push" || perm == "maintain" || perm == "admin" }

// teamCanOwnLocked: the team exists in the repository's organization, is visible, and has
// write access to the repository itself.
func (s *Server) teamCanOwnLocked(rm *repoMeta, org, slug string) bool {
	if !strings.EqualFold(org, rm.Owner) {
		return false
	}
	t := s.st.Teams[teamKey(org, slug)]
	return t != nil && t.Privacy != "secret" && writeAccess(t.Repos[repoKey(rm.Owner, rm.Name)])
}

// userCanOwnLocked: the account exists and has write access to the repository.
func (s *Server) userCanOwnLocked(rm *repoMeta, login string) bool {
	return s.st.Accounts[strings.ToLower(login)] != nil && writeAccess(s.effectivePermission(rm, login))
}
