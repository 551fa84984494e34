package review

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// codeownersPaths are where GitHub looks for a repo's CODEOWNERS, in its order.
var codeownersPaths = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

// ownerRule is one CODEOWNERS line: a pattern and the team slugs it names
// (@org/team; users and emails are not teams and are ignored).
type ownerRule struct {
	pattern string
	teams   []string
}

// codeowners reads the control repo's CODEOWNERS from fsys (the base: a
// change cannot grant its author rights by editing it, and editing it
// needs a platform admin). Missing or unreadable: no rules.
func codeowners(fsys fs.FS) []ownerRule {
	if fsys == nil {
		return nil
	}
	for _, p := range codeownersPaths {
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		var rules []ownerRule
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			r := ownerRule{pattern: fields[0]}
			for _, o := range fields[1:] {
				if strings.HasPrefix(o, "#") {
					break
				}
				if _, team, ok := strings.Cut(strings.TrimPrefix(o, "@"), "/"); ok && strings.HasPrefix(o, "@") {
					r.teams = append(r.teams, strings.ToLower(team))
				}
			}
			rules = append(rules, r)
		}
		return rules
	}
	return nil
}

// ownersOf returns the teams of the last rule matching p (GitHub: the last
// matching pattern takes precedence), and the pattern.
func ownersOf(rules []ownerRule, p string) ([]string, string) {
	for i := len(rules) - 1; i >= 0; i-- {
		if codeownersMatch(rules[i].pattern, p) {
			return rules[i].teams, rules[i].pattern
		}
	}
	return nil, ""
}

// codeownersMatch matches the gitignore-style patterns CODEOWNERS uses, in
// the forms a control repo needs: "*", a directory ("/clusters/team-a/"),
// and a glob anchored at the root ("/clusters/payments-*.yaml") or, without
// a slash, matching a file name anywhere ("*.yaml").
func codeownersMatch(pattern, p string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "/"):
		dir := strings.TrimPrefix(pattern, "/")
		return strings.HasPrefix(p, dir)
	case !strings.Contains(strings.TrimSuffix(pattern, "/"), "/"):
		ok, _ := path.Match(pattern, path.Base(p))
		return ok
	}
	ok, _ := path.Match(strings.TrimPrefix(pattern, "/"), p)
	return ok
}

// delegated lets the teams that own a cluster file by the control repo's
// CODEOWNERS add or change it, which platform admins otherwise must do,
// as long as the change leaves spec.provision.deletionPolicy alone: whether
// removing a cluster destroys its machines stays platform admins' decision,
// as do provision profiles and management clusters (platform.yaml) and the
// removal of a cluster file. fc is judge's verdict for the path.
func delegated(fc FileChange, c fileDiff, rules []ownerRule, base, head *control.Repo, m *membership) FileChange {
	if fc.Allowed || base == nil || head == nil || !strings.HasPrefix(c.path, "clusters/") || (c.op != OpAdded && c.op != OpChanged) {
		return fc
	}
	teams, pattern := ownersOf(rules, c.path)
	teams = slices.DeleteFunc(slices.Clone(teams), func(t string) bool { return slices.Contains(base.Platform.Spec.Admins, t) })
	if len(teams) == 0 {
		return fc
	}
	hc, bc := clusterIn(head, c.path), clusterIn(base, c.path)
	if hc == nil {
		return fc
	}
	if deletionPolicy(hc) != deletionPolicy(bc) {
		fc.Reason = "only platform admins may set or change spec.provision.deletionPolicy: it decides whether removing the cluster destroys its machines"
		return fc
	}
	owner := "code owners of " + c.path + " (" + pattern + ")"
	if team, ok := m.in(teams); ok {
		fc.Owner, fc.Allowed = owner, true
		fc.Reason = "team " + team + " owns " + c.path + " by the control repo's CODEOWNERS (" + pattern + "); the change leaves spec.provision.deletionPolicy alone"
		return fc
	}
	fc.Owner = owner
	fc.Reason = "only platform admins or the owners of " + c.path + " by the control repo's CODEOWNERS (" + strings.Join(teams, ", ") + ") may add or change it"
	return fc
}

func clusterIn(r *control.Repo, file string) *control.Cluster {
	if r == nil {
		return nil
	}
	for _, c := range r.Clusters {
		if c.Source.File == file {
			return c
		}
	}
	return nil
}

func deletionPolicy(c *control.Cluster) string {
	if c == nil || c.Spec.Provision == nil {
		return ""
	}
	return c.Spec.Provision.DeletionPolicy
}
