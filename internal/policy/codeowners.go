package policy

import (
	"bytes"
	"strings"
)

// Rule is one CODEOWNERS line: a GitHub path pattern and the team slugs
// (without the owner prefix) that own it.
type Rule struct {
	Pattern string
	Teams   []string
}

// CODEOWNERS renders a managed CODEOWNERS file for a repo of owner. GitHub
// applies the last matching pattern, so rules must be ordered from general
// ("*", the platform admins) to specific (the scaffolded paths a persona
// owns). A rule with no teams is written as a comment and not as a pattern:
// an ownerless pattern would take the path away from the platform admins,
// while omitting it leaves the path with the earlier, broader rule.
func CODEOWNERS(owner string, rules []Rule) []byte {
	var b bytes.Buffer
	b.WriteString("# Managed by fleetbot: changes are overwritten.\n")
	b.WriteString("# Change owners in the fleetbot control repo instead.\n")
	b.WriteString("# The last matching pattern takes precedence.\n")
	for _, r := range rules {
		var owners []string
		for _, t := range r.Teams {
			if t = strings.TrimSpace(t); t != "" {
				owners = append(owners, "@"+owner+"/"+t)
			}
		}
		if len(owners) == 0 {
			b.WriteString("# " + r.Pattern + " has no team of its own: it stays with the rules above.\n")
			continue
		}
		b.WriteString(r.Pattern + " " + strings.Join(owners, " ") + "\n")
	}
	return b.Bytes()
}
