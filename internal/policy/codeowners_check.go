package policy

import (
	"fmt"
	"strings"
)

// CodeownersError is one problem of a CODEOWNERS file, as GitHub reports it
// (GET /repos/{owner}/{repo}/codeowners/errors) or as CheckCODEOWNERS finds
// it offline.
type CodeownersError struct {
	// Path is the CODEOWNERS file, e.g. ".github/CODEOWNERS".
	Path string `json:"path,omitempty"`
	Line int    `json:"line"`
	// Kind is GitHub's class of error: "Invalid pattern", "Unknown owner",
	// "Invalid owner".
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// String renders "path:line: kind: message".
func (e CodeownersError) String() string {
	p := e.Path
	if p == "" {
		p = "CODEOWNERS"
	}
	return fmt.Sprintf("%s:%d: %s: %s", p, e.Line, e.Kind, e.Message)
}

// CheckCODEOWNERS checks a CODEOWNERS file of a repo of owner the way
// GitHub's errors endpoint does, for forges that have no such endpoint (the
// local forge): patterns GitHub does not support (negation, character
// ranges), malformed owners, teams of another org or missing in org, and
// teams or users without write access to the repo (GitHub ignores such an
// owner, so a path would silently lose its required reviewer). access is the
// repo's access once converged.
func CheckCODEOWNERS(path string, content []byte, owner string, org Org, access Access) []CodeownersError {
	var out []CodeownersError
	add := func(line int, kind, format string, args ...any) {
		out = append(out, CodeownersError{Path: path, Line: line, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	// Every line is checked, however long: a line-length limit (bufio.Scanner's 64 KiB) would
	// end the check early and hide the errors of every line after it.
	for i, line := range strings.Split(string(content), "\n") {
		n := i + 1
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		pattern := fields[0]
		switch {
		case strings.HasPrefix(pattern, "!"):
			add(n, "Invalid pattern", "negation patterns are not supported: %s", pattern)
			continue
		case strings.ContainsAny(pattern, "[]"):
			add(n, "Invalid pattern", "character ranges are not supported: %s", pattern)
			continue
		}
		for _, o := range fields[1:] {
			switch {
			case strings.HasPrefix(o, "@") && strings.Contains(o, "/"):
				org2, slug, _ := strings.Cut(o[1:], "/")
				switch {
				case !strings.EqualFold(org2, owner):
					add(n, "Unknown owner", "team %s belongs to another organization than %s", o, owner)
				case !org.HasTeam(slug):
					add(n, "Unknown owner", "team %s does not exist in %s", o, owner)
				case Rank(teamRole(access, slug)) < Rank(RolePush):
					add(n, "Unknown owner", "team %s has no write access to the repository", o)
				}
			case strings.HasPrefix(o, "@"):
				if Rank(access.Collaborators[o[1:]]) < Rank(RolePush) {
					add(n, "Unknown owner", "user %s is not a collaborator with write access", o)
				}
			case strings.Contains(o, "@"):
				// An email address: GitHub resolves it to a verified account.
			default:
				add(n, "Invalid owner", "%s is not a valid owner; owners are @user, @org/team or an email", o)
			}
		}
	}
	return out
}

func teamRole(a Access, slug string) Role {
	for k, v := range a.Teams {
		if strings.EqualFold(k, slug) {
			return v
		}
	}
	return ""
}
