package githubtest

import (
	"encoding/json"
	"net/url"
)

// fullRepoJSON is a repository as GitHub's full-repository answers show it (GET, PATCH and
// POST of a repository; list entries are minimal-repository, a subset): repoJSON's fields
// plus every property GitHub documents that the fake has no state for, with the values and
// URL templates of GitHub's documented example, and null where GitHub sends null. A property
// repoJSON sets is never overwritten.
// https://docs.github.com/rest/repos/repos#get-a-repository
func (s *Server) fullRepoJSON(rm *repoMeta) map[string]any {
	data, err := json.Marshal(s.repoJSON(rm))
	out := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(data, &out)
	}
	api := s.repoAPI(rm)
	defaults := map[string]any{
		"archive_url":       api + "/{archive_format}{/ref}",
		"assignees_url":     api + "/assignees{/user}",
		"blobs_url":         api + "/git/blobs{/sha}",
		"branches_url":      api + "/branches{/branch}",
		"collaborators_url": api + "/collaborators{/collaborator}",
		"comments_url":      api + "/comments{/number}",
		"commits_url":       api + "/commits{/sha}",
		"compare_url":       api + "/compare/{base}...{head}",
		"contents_url":      api + "/contents/{+path}",
		"contributors_url":  api + "/contributors",
		"deployments_url":   api + "/deployments",
		"downloads_url":     api + "/downloads",
		"events_url":        api + "/events",
		"forks_url":         api + "/forks",
		"git_commits_url":   api + "/git/commits{/sha}",
		"git_refs_url":      api + "/git/refs{/sha}",
		"git_tags_url":      api + "/git/tags{/sha}",
		"hooks_url":         api + "/hooks",
		"issue_comment_url": api + "/issues/comments{/number}",
		"issue_events_url":  api + "/issues/events{/number}",
		"issues_url":        api + "/issues{/number}",
		"keys_url":          api + "/keys{/key_id}",
		"labels_url":        api + "/labels{/name}",
		"languages_url":     api + "/languages",
		"merges_url":        api + "/merges",
		"milestones_url":    api + "/milestones{/number}",
		"notifications_url": api + "/notifications{?since,all,participating}",
		"pulls_url":         api + "/pulls{/number}",
		"releases_url":      api + "/releases{/id}",
		"stargazers_url":    api + "/stargazers",
		"statuses_url":      api + "/statuses/{sha}",
		"subscribers_url":   api + "/subscribers",
		"subscription_url":  api + "/subscription",
		"tags_url":          api + "/tags",
		"teams_url":         api + "/teams",
		"trees_url":         api + "/git/trees{/sha}",
		"ssh_url":           "git@" + hostOf(s.URL) + ":" + rm.fullName() + ".git",
		"svn_url":           s.URL + "/" + rm.fullName(),
		"mirror_url":        nil,
		"homepage":          nil,
		"language":          nil,
		"license":           nil,
		"forks":             0,
		"forks_count":       0,
		"stargazers_count":  0,
		"watchers":          0,
		"watchers_count":    0,
		"open_issues":       s.openIssuesLocked(rm),
		"open_issues_count": s.openIssuesLocked(rm),
		"network_count":     0,
		"subscribers_count": 0,
		"has_issues":        true,
		"has_projects":      true,
		"has_wiki":          true,
		"has_pages":         false,
		"has_downloads":     true,
		"has_discussions":   false,
		"archived":          rm.Archived,
		"disabled":          false,
		"fork":              false,
		"description":       nil,
	}
	for k, v := range defaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// openIssuesLocked counts the open issues and pull requests, as open_issues_count does.
func (s *Server) openIssuesLocked(rm *repoMeta) int {
	n := 0
	for _, is := range rm.Issues {
		if is.State == "open" {
			n++
		}
	}
	return n
}

// hostOf is the host of a base URL ("127.0.0.1:8080").
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	return u.Host
}
