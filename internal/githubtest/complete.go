package githubtest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// The functions of this file complete the fake's answers that are built from go-github v62
// types (which drop the properties GitHub sends as null and the URLs fleetbot never reads) to
// every property GitHub's REST description requires, with the values and URL templates of
// GitHub's documented examples, and null where GitHub sends null.

// documentedEpoch stands for the creation time of what the fake keeps no creation time for
// (teams, organizations): the date of GitHub's documented examples.
var documentedEpoch = time.Date(2008, time.January, 14, 4, 33, 35, 0, time.UTC)

// asMap is v as a JSON object (v is one of the fake's own go-github values: it marshals).
func asMap(v any) map[string]any {
	out := map[string]any{}
	if data, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(data, &out)
	}
	return out
}

// fill sets each property of defaults that out lacks; a property out has is never overwritten.
func fill(out, defaults map[string]any) map[string]any {
	for k, v := range defaults {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// appJSON is the fake's App as GitHub shows an integration (GET /app, a check run's "app").
// https://docs.github.com/rest/apps/apps#get-the-authenticated-app
func (s *Server) appJSON(now time.Time) map[string]any {
	ts := now.UTC().Format(time.RFC3339)
	return map[string]any{
		"id":           s.cfg.appID,
		"slug":         s.cfg.appSlug,
		"node_id":      nodeID("App", s.cfg.appID),
		"client_id":    fmt.Sprintf("Iv1.%016x", s.cfg.appID),
		"owner":        s.userJSON(DefaultUser),
		"name":         s.cfg.appSlug,
		"description":  nil,
		"external_url": s.URL,
		"html_url":     s.URL + "/apps/" + s.cfg.appSlug,
		"created_at":   ts,
		"updated_at":   ts,
		"permissions":  s.grantedPermissions(),
		"events":       s.appEvents(),
	}
}

// fullInstallationJSON is an installation as GitHub's apps endpoints show it: installationJSON
// plus the properties GitHub sends as null for an installation that is not suspended and has
// no single-file permission.
// https://docs.github.com/rest/apps/apps#get-an-organization-installation-for-the-authenticated-app
func (s *Server) fullInstallationJSON(in *installation) map[string]any {
	return fill(asMap(s.installationJSON(in)), map[string]any{
		"single_file_name": nil, "suspended_by": nil, "suspended_at": nil,
	})
}

// fullCheckRunJSON is a check run as the checks API answers it: checkRunJSON plus the full
// App, null for a run not yet concluded, an empty output, the open pull requests whose head is
// the run's commit and a check suite (the fake has none: the run's id stands in for it).
// https://docs.github.com/rest/checks/runs#create-a-check-run
func (s *Server) fullCheckRunJSON(rm *repoMeta, cr *checkRun) map[string]any {
	out := asMap(s.checkRunJSON(rm, cr))
	created := cr.StartedAt
	if created.IsZero() {
		created = s.clock.Now()
	}
	out["app"] = s.checkRunAppJSON(cr, created)
	output, _ := out["output"].(map[string]any)
	if output == nil {
		output = map[string]any{}
	}
	out["output"] = fill(output, map[string]any{
		"title": nil, "summary": nil, "text": nil, "annotations_count": len(cr.Annotations),
		"annotations_url": fmt.Sprintf("%s/check-runs/%d/annotations", s.repoAPI(rm), cr.ID),
	})
	return fill(out, map[string]any{
		"conclusion": nil, "completed_at": nil, "started_at": nil,
		"check_suite":   map[string]any{"id": cr.ID},
		"pull_requests": s.checkRunPullsLocked(rm, cr.HeadSHA),
	})
}

// fullRepoCommitJSON is a commit as the repos API (a branch, compare) shows it:
// repoCommitJSON plus the comments URL and count, the tree's URL, the verification properties
// GitHub sends as null, and null for an author or committer GitHub links to no account.
// https://docs.github.com/rest/commits/commits#get-a-commit
func (s *Server) fullRepoCommitJSON(rm *repoMeta, c *object.Commit) map[string]any {
	out := fill(asMap(s.repoCommitJSON(rm, c)), map[string]any{
		"author": nil, "committer": nil, "parents": []any{},
		"comments_url": s.repoAPI(rm) + "/commits/" + c.Hash.String() + "/comments",
	})
	if gc, ok := out["commit"].(map[string]any); ok {
		fill(gc, map[string]any{"comment_count": 0})
		if tree, ok := gc["tree"].(map[string]any); ok {
			fill(tree, map[string]any{"url": s.repoAPI(rm) + "/git/trees/" + c.TreeHash.String()})
		}
		if v, ok := gc["verification"].(map[string]any); ok {
			fill(v, map[string]any{"signature": nil, "payload": nil, "verified_at": nil})
		}
	}
	return out
}

// fullBranchJSON is a branch as GET .../branches/{branch} answers it: its links and
// protection summary besides its name and commit.
// https://docs.github.com/rest/branches/branches#get-a-branch
func (s *Server) fullBranchJSON(rm *repoMeta, name string, c *object.Commit) map[string]any {
	api := s.repoAPI(rm) + "/branches/" + url.PathEscape(name)
	p := rm.Protection[name]
	checks := map[string]any{"enforcement_level": "off", "contexts": []string{}, "checks": []any{}}
	if p != nil && p.HasStatusChecks {
		level := "non_admins"
		if p.EnforceAdmins {
			level = "everyone"
		}
		contexts := append([]string{}, p.RequiredStatusChecks...)
		list := []any{}
		for _, ctx := range contexts {
			list = append(list, map[string]any{"context": ctx, "app_id": p.checkApp(ctx)})
		}
		checks = map[string]any{"enforcement_level": level, "contexts": contexts, "checks": list}
	}
	return map[string]any{
		"name":           name,
		"commit":         s.fullRepoCommitJSON(rm, c),
		"_links":         map[string]any{"html": s.URL + "/" + rm.fullName() + "/tree/" + name, "self": api},
		"protected":      p != nil,
		"protection":     map[string]any{"enabled": p != nil, "required_status_checks": checks},
		"protection_url": api + "/protection",
	}
}

// fullContentJSON is a file or directory entry as the contents API answers it: contentJSON
// plus its links and raw download URL (null for a directory).
// https://docs.github.com/rest/repos/contents#get-repository-content
func (s *Server) fullContentJSON(rm *repoMeta, p string, c map[string]any, ref string) map[string]any {
	var download any
	if c["type"] == "file" {
		download = s.URL + "/raw/" + rm.fullName() + "/" + ref + "/" + p
	}
	return fill(c, map[string]any{
		"_links":       map[string]any{"self": c["url"], "git": c["git_url"], "html": c["html_url"]},
		"download_url": download,
	})
}

// fullTeamJSON is a team as GET /orgs/{org}/teams/{team_slug} answers it: teamJSON plus its
// type, organization and (undocumented by the fake) creation times.
// https://docs.github.com/rest/teams/teams#get-a-team-by-name
func (s *Server) fullTeamJSON(t *team) map[string]any {
	ts := documentedEpoch.Format(time.RFC3339)
	return fill(asMap(s.teamJSON(t, "")), map[string]any{
		"type": "organization", "parent": nil, "created_at": ts, "updated_at": ts,
		"organization": s.teamOrgJSON(t.Org),
	})
}

// teamOrgJSON is an organization as a full team shows it.
func (s *Server) teamOrgJSON(org string) map[string]any {
	a := s.st.Accounts[strings.ToLower(org)]
	var id int64
	login := org
	if a != nil {
		id, login = a.ID, a.Login
	}
	api := s.APIURL() + "orgs/" + url.PathEscape(login)
	ts := documentedEpoch.Format(time.RFC3339)
	return map[string]any{
		"login": login, "id": id, "node_id": nodeID("Organization", id), "type": "Organization",
		"url": api, "repos_url": api + "/repos", "events_url": api + "/events", "hooks_url": api + "/hooks",
		"issues_url": api + "/issues", "members_url": api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}",
		"avatar_url":         fmt.Sprintf("%s/avatars/u/%d?v=4", s.URL, id),
		"description":        nil, "html_url": s.URL + "/" + url.PathEscape(login),
		"has_organization_projects": true, "has_repository_projects": true,
		"public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
		"created_at": ts, "updated_at": ts, "archived_at": nil,
	}
}

// fullUserJSON is an account as GET /user answers it for a user: its public profile (the fake
// keeps none: null and zero), with user_view_type "public".
// https://docs.github.com/rest/users/users#get-the-authenticated-user
func (s *Server) fullUserJSON(login string) map[string]any {
	ts := documentedEpoch.Format(time.RFC3339)
	return fill(asMap(s.userJSON(login)), map[string]any{
		"user_view_type": "public",
		"name":           nil, "company": nil, "blog": "", "location": nil, "email": nil,
		"hireable": nil, "bio": nil, "public_repos": 0, "public_gists": 0,
		"followers": 0, "following": 0, "created_at": ts, "updated_at": ts,
	})
}
