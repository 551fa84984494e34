package control

import (
	"regexp"
	"strings"
)

// CodeownersPaths are where GitHub looks for a repo's CODEOWNERS, in its order: the first
// that exists is the one it uses.
var CodeownersPaths = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

// MaxCodeownersBytes is GitHub's limit on a CODEOWNERS file: a bigger one is not loaded.
const MaxCodeownersBytes = 3 << 20

// Codeowners is the control repo's CODEOWNERS file: who must review a change to which path.
// fleetbot reads it to know who may approve a rollout wave (the owners of
// rollout/approvals/<wave>.yaml).
type Codeowners struct {
	// File is the path it was read from (one of CodeownersPaths).
	File  string
	Rules []CodeownersRule
}

// CodeownersRule is one line of CODEOWNERS: a pattern and its owners.
type CodeownersRule struct {
	Pattern string
	// Owners are as written: @user, @org/team or an email.
	Owners []string
	Line   int
	match  *regexp.Regexp // nil: a pattern GitHub does not support (negation, ranges)
}

// ParseCodeowners reads a CODEOWNERS file as GitHub does: one pattern and its owners per line,
// # starting a comment.
func ParseCodeowners(file string, data []byte) *Codeowners {
	c := &Codeowners{File: file}
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.Index(line, " #"); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		c.Rules = append(c.Rules, CodeownersRule{Pattern: fields[0], Owners: fields[1:], Line: i + 1, match: codeownersPattern(fields[0])})
	}
	return c
}

// Owner returns the rule that owns the repo path p (GitHub: the last matching line wins),
// false when none matches (the path has no code owner).
func (c *Codeowners) Owner(p string) (CodeownersRule, bool) {
	if c == nil {
		return CodeownersRule{}, false
	}
	for i := len(c.Rules) - 1; i >= 0; i-- {
		if r := c.Rules[i]; r.match != nil && r.match.MatchString(p) {
			return r, true
		}
	}
	return CodeownersRule{}, false
}

// Teams returns the team slugs the rule names (@org/team), lower-cased; users and emails are
// not teams.
func (r CodeownersRule) Teams() []string {
	var out []string
	for _, o := range r.Owners {
		if _, team, ok := strings.Cut(strings.TrimPrefix(o, "@"), "/"); ok && strings.HasPrefix(o, "@") {
			out = append(out, strings.ToLower(team))
		}
	}
	return out
}

// Users returns the user logins the rule names (@login), lower-cased, bots included.
func (r CodeownersRule) Users() []string {
	var out []string
	for _, o := range r.Owners {
		if strings.HasPrefix(o, "@") && !strings.Contains(o, "/") {
			out = append(out, strings.ToLower(o[1:]))
		}
	}
	return out
}

// codeownersPattern compiles a CODEOWNERS pattern, in GitHub's reading of gitignore's rules: a
// pattern with a slash at its start or in its middle is anchored at the repo root, otherwise
// it matches at any depth; a pattern naming a directory owns everything under it, except that
// a last segment "*" matches only the files directly in its directory; "*" and "?" stay in one
// path segment, "**" crosses them. Negation and character ranges, which GitHub does not
// support, match nothing.
func codeownersPattern(p string) *regexp.Regexp {
	if strings.HasPrefix(p, "!") || strings.ContainsAny(p, "[]") || strings.Trim(p, "/") == "" && p != "*" {
		return nil
	}
	anchored := strings.HasPrefix(p, "/") || strings.Contains(strings.TrimSuffix(p, "/"), "/")
	body := strings.Trim(p, "/")
	var re strings.Builder
	re.WriteString("^")
	if !anchored {
		re.WriteString("(?:.*/)?")
	}
	for i := 0; i < len(body); i++ {
		switch {
		case strings.HasPrefix(body[i:], "**/"):
			re.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(body[i:], "**"):
			re.WriteString(".*")
			i++
		case body[i] == '*':
			re.WriteString("[^/]*")
		case body[i] == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(body[i : i+1]))
		}
	}
	switch {
	case strings.HasSuffix(p, "/"):
		re.WriteString("/.*")
	case strings.HasSuffix(body, "/*") && !strings.HasSuffix(body, "/**"):
		// docs/* owns docs/a.md, not docs/build/a.md (GitHub's documented example).
	default:
		re.WriteString("(?:/.*)?")
	}
	re.WriteString("$")
	m, err := regexp.Compile(re.String())
	if err != nil { // cannot happen: every literal is quoted
		return nil
	}
	return m
}

// botOwner reports whether a CODEOWNERS owner is a bot account (login ending in [bot]): it cannot
// review a change, so it cannot approve one.
func botOwner(owner string) bool {
	return strings.HasSuffix(strings.ToLower(owner), "[bot]")
}
