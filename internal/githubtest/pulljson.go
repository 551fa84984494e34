package githubtest

import (
	"encoding/json"
	"fmt"
)

// fullPullJSON is a pull request as GitHub's pull-request answers show it: pullJSON's fields
// plus every property GitHub documents that the fake has no state for (counts it does not
// compute are 0), the documented URLs and _links, null where GitHub sends null, and the head
// and base repositories in full. A property pullJSON sets is never overwritten.
// https://docs.github.com/rest/pulls/pulls#get-a-pull-request
func (s *Server) fullPullJSON(rm *repoMeta, is *issue) map[string]any {
	p := s.pullJSON(rm, is)
	data, err := json.Marshal(p)
	out := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(data, &out)
	}
	api := s.repoAPI(rm)
	self := fmt.Sprintf("%s/pulls/%d", api, is.Number)
	html := fmt.Sprintf("%s/%s/pull/%d", s.URL, rm.fullName(), is.Number)
	statuses := api + "/statuses/" + p.GetHead().GetSHA()
	href := func(u string) map[string]any { return map[string]any{"href": u} }
	defaults := map[string]any{
		"diff_url":            html + ".diff",
		"patch_url":           html + ".patch",
		"commits_url":         self + "/commits",
		"review_comments_url": self + "/comments",
		"review_comment_url":  api + "/pulls/comments{/number}",
		"statuses_url":        statuses,
		"_links": map[string]any{
			"self": href(self), "html": href(html), "issue": href(fmt.Sprintf("%s/issues/%d", api, is.Number)),
			"comments":        href(fmt.Sprintf("%s/issues/%d/comments", api, is.Number)),
			"review_comments": href(self + "/comments"), "review_comment": href(api + "/pulls/comments{/number}"),
			"commits": href(self + "/commits"), "statuses": href(statuses),
		},
		"assignee":              nil,
		"assignees":             []any{},
		"requested_reviewers":   []any{},
		"requested_teams":       []any{},
		"milestone":             nil,
		"locked":                false,
		"author_association":    "NONE",
		"auto_merge":            nil,
		"merge_commit_sha":      nil,
		"merged_at":             nil,
		"closed_at":             nil,
		"merged_by":             nil,
		"mergeable":             nil,
		"mergeable_state":       "unknown",
		"maintainer_can_modify": false,
		"additions":             0,
		"deletions":             0,
		"changed_files":         0,
		"commits":               0,
		"comments":              0,
		"review_comments":       0,
		"body":                  nil,
		"labels":                []any{},
	}
	for k, v := range defaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	if labels, ok := out["labels"].([]any); ok {
		for _, l := range labels {
			if m, ok := l.(map[string]any); ok {
				for k, v := range map[string]any{"description": "", "color": "ededed", "default": false} {
					if _, ok := m[k]; !ok {
						m[k] = v
					}
				}
			}
		}
	}
	for _, side := range []string{"head", "base"} {
		if b, ok := out[side].(map[string]any); ok {
			b["repo"] = s.fullRepoJSON(rm)
		}
	}
	return out
}

// fullIssueJSON is an issue as GitHub's issue answers show it: issueJSON's fields plus every
// property GitHub's description requires that the fake keeps no state for (null where GitHub
// sends null), and the documented URLs. A
// property issueJSON sets is never overwritten.
// https://docs.github.com/rest/issues/issues#get-an-issue
func (s *Server) fullIssueJSON(rm *repoMeta, is *issue) map[string]any {
	data, err := json.Marshal(s.issueJSON(rm, is))
	out := map[string]any{}
	if err == nil {
		_ = json.Unmarshal(data, &out)
	}
	api := s.repoAPI(rm)
	self := fmt.Sprintf("%s/issues/%d", api, is.Number)
	comments := 0
	for _, c := range rm.Comments {
		if c.Number == is.Number {
			comments++
		}
	}
	defaults := map[string]any{
		"assignee":       nil,
		"assignees":      []any{},
		"closed_at":      nil,
		"comments":       comments,
		"comments_url":   self + "/comments",
		"events_url":     self + "/events",
		"labels":         []any{},
		"labels_url":     self + "/labels{/name}",
		"locked":         false,
		"milestone":      nil,
		"repository_url": api,
	}
	for k, v := range defaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}
