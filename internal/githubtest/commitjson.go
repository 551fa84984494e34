package githubtest

import (
	"encoding/json"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// fullGitCommitJSON is a commit as the Git Data API answers it: gitCommitJSON's fields plus
// the tree's URL and the verification properties GitHub sends as null when it has none. A
// property gitCommitJSON sets is never overwritten.
// https://docs.github.com/rest/git/commits#get-a-commit-object
func (s *Server) fullGitCommitJSON(rm *repoMeta, c *object.Commit) map[string]any {
	data, err := json.Marshal(s.gitCommitJSON(rm, c))
	out := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(data, &out)
	}
	if _, ok := out["parents"]; !ok {
		out["parents"] = []any{} // a root commit
	}
	if tree, ok := out["tree"].(map[string]any); ok {
		if _, ok := tree["url"]; !ok {
			tree["url"] = s.repoAPI(rm) + "/git/trees/" + c.TreeHash.String()
		}
	}
	if v, ok := out["verification"].(map[string]any); ok {
		for _, k := range []string{"signature", "payload", "verified_at"} {
			if _, ok := v[k]; !ok {
				v[k] = nil
			}
		}
	}
	return out
}
