package githubtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The payloads of the webhooks the fake sends, as GitHub's published webhook schemas describe
// them (@octokit/webhooks-schemas; TestWebhookPayloadsMatchGitHubsSchemas validates each): the
// objects of an event carry the properties its schema lists and no other (most of its
// definitions forbid additional properties), null where GitHub sends null, and GitHub's
// documented URL templates where the fake keeps no state.
// https://docs.github.com/webhooks/webhook-events-and-payloads

// Payload is a webhook payload as GitHub sends it: one JSON object. It marshals as that object;
// Decode gives a typed view (a go-github event), Set edits it for a test.
type Payload struct{ m map[string]any }

// MarshalJSON writes the payload.
func (p *Payload) MarshalJSON() ([]byte, error) { return json.Marshal(p.m) }

// Decode decodes the payload into v, e.g. a *github.PushEvent.
func (p *Payload) Decode(v any) error {
	data, err := json.Marshal(p.m)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// Set sets the property at a dotted path ("sender.login", "pull_request.base.sha"), creating
// the objects on the way, for a test that delivers an edited payload.
func (p *Payload) Set(path string, v any) {
	m := p.m
	parts := strings.Split(path, ".")
	for _, k := range parts[:len(parts)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// pick keeps of m the properties keys names (a webhook schema forbids others).
func pick(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// hookUserKeys are the properties of a webhook's user.
var hookUserKeys = []string{"login", "id", "node_id", "name", "email", "avatar_url", "gravatar_id", "url", "html_url",
	"followers_url", "following_url", "gists_url", "starred_url", "subscriptions_url", "organizations_url", "repos_url",
	"events_url", "received_events_url", "type", "site_admin"}

// hookUser is an account as a webhook shows it (a sender, an owner, a pull request's author).
func (s *Server) hookUser(login string) map[string]any {
	s.ensureAccountLocked(login, "User")
	return pick(asMap(s.userJSON(login)), hookUserKeys...)
}

// hookOrg is the organization of a webhook about its repository; nil for a user's repository.
func (s *Server) hookOrg(owner string) map[string]any {
	a := s.st.Accounts[strings.ToLower(owner)]
	if a == nil || a.Type != "Organization" {
		return nil
	}
	return pick(s.teamOrgJSON(a.Login), "login", "id", "node_id", "url", "html_url", "repos_url", "events_url", "hooks_url",
		"issues_url", "members_url", "public_members_url", "avatar_url", "description")
}

// hookRepoKeys are the properties of a webhook's repository.
var hookRepoKeys = []string{"id", "node_id", "name", "full_name", "private", "owner", "html_url", "description", "fork", "url",
	"forks_url", "keys_url", "collaborators_url", "teams_url", "hooks_url", "issue_events_url", "events_url", "assignees_url",
	"branches_url", "tags_url", "blobs_url", "git_tags_url", "git_refs_url", "trees_url", "statuses_url", "languages_url",
	"stargazers_url", "contributors_url", "subscribers_url", "subscription_url", "commits_url", "git_commits_url",
	"comments_url", "issue_comment_url", "contents_url", "compare_url", "merges_url", "archive_url", "downloads_url",
	"issues_url", "pulls_url", "milestones_url", "notifications_url", "labels_url", "releases_url", "deployments_url",
	"created_at", "updated_at", "pushed_at", "git_url", "ssh_url", "clone_url", "svn_url", "homepage", "size",
	"stargazers_count", "watchers_count", "language", "has_issues", "has_projects", "has_downloads", "has_wiki", "has_pages",
	"has_discussions", "forks_count", "mirror_url", "archived", "disabled", "open_issues_count", "license", "forks",
	"open_issues", "watchers", "stargazers", "default_branch", "allow_squash_merge", "allow_merge_commit",
	"allow_rebase_merge", "allow_auto_merge", "is_template", "web_commit_signoff_required", "topics", "visibility",
	"master_branch", "organization", "custom_properties"}

// hookRepo is a repository as a webhook shows it; a push event's carries its creation and push
// times as Unix seconds, its stargazers and master_branch, and its organization's login.
func (s *Server) hookRepo(rm *repoMeta, push bool) map[string]any {
	r := s.fullRepoJSON(rm)
	r["owner"] = s.hookUser(rm.Owner)
	r["is_template"], r["web_commit_signoff_required"] = false, false
	r["custom_properties"] = map[string]any{}
	r["topics"] = append([]string{}, rm.Topics...)
	if push {
		r["created_at"], r["pushed_at"] = rm.CreatedAt.Unix(), rm.PushedAt.Unix()
		r["stargazers"], r["master_branch"] = 0, rm.DefaultBranch
		if s.hookOrg(rm.Owner) != nil {
			r["organization"] = rm.Owner
		}
	}
	return pick(r, hookRepoKeys...)
}

// hookEnvelope sets what every repository event carries: the repository, the sender, and the
// installation and organization when there is one.
func (s *Server) hookEnvelope(out map[string]any, rm *repoMeta, sender string, push bool) map[string]any {
	out["repository"] = s.hookRepo(rm, push)
	out["sender"] = s.hookUser(sender)
	if in := s.installationForLocked(rm.Owner); in != nil {
		out["installation"] = map[string]any{"id": in.GetID(), "node_id": in.GetNodeID()}
	}
	if org := s.hookOrg(rm.Owner); org != nil {
		out["organization"] = org
	}
	return out
}

// hookCommit is a commit of a push event.
func (s *Server) hookCommit(rm *repoMeta, g *gitRepo, c *object.Commit) map[string]any {
	hc := s.headCommitLocked(rm, g, c)
	out := pick(asMap(hc), "id", "tree_id", "distinct", "message", "timestamp", "url")
	out["added"], out["removed"], out["modified"] = hc.Added, hc.Removed, hc.Modified
	who := func(sg object.Signature) map[string]any {
		m := map[string]any{"name": sg.Name, "email": sg.Email, "date": sg.When.UTC().Format(time.RFC3339)}
		if login, ok := s.loginForEmail(sg.Email); ok {
			m["username"] = login
		}
		return m
	}
	out["author"], out["committer"] = who(c.Author), who(c.Committer)
	return out
}

// pushPayloadLocked is the push event of one ref change by actor.
// https://docs.github.com/webhooks/webhook-events-and-payloads#push
func (s *Server) pushPayloadLocked(rm *repoMeta, g *gitRepo, ch refChange, actor string) map[string]any {
	out := map[string]any{
		"ref": ch.name, "before": ch.before.String(), "after": ch.after.String(),
		"created": ch.before.IsZero(), "deleted": ch.after.IsZero(),
		"forced":   !ch.before.IsZero() && !ch.after.IsZero() && !g.isAncestor(ch.before, ch.after),
		"base_ref": nil, // a branch push: GitHub names a base ref only for a tag on a branch's head
		"compare":  fmt.Sprintf("%s/%s/compare/%s...%s", s.URL, rm.fullName(), ch.before.String()[:12], ch.after.String()[:12]),
		"commits":  []any{}, "head_commit": nil,
		"pusher": map[string]any{"name": actor, "email": s.noreplyEmail(actor)},
	}
	if !ch.after.IsZero() {
		commits, _ := g.reachable(ch.after, ch.before)
		var list []any
		for i := len(commits) - 1; i >= 0 && len(list) < 20; i-- {
			list = append(list, s.hookCommit(rm, g, commits[i]))
		}
		if list != nil {
			out["commits"] = list
		}
		if c, err := g.commit(ch.after); err == nil {
			out["head_commit"] = s.hookCommit(rm, g, c)
		}
	}
	return s.hookEnvelope(out, rm, actor, true)
}

// hookPullKeys are the properties of a webhook's pull request.
var hookPullKeys = []string{"url", "id", "node_id", "html_url", "diff_url", "patch_url", "issue_url", "number", "state",
	"locked", "title", "user", "body", "created_at", "updated_at", "closed_at", "merged_at", "merge_commit_sha", "assignee",
	"assignees", "requested_reviewers", "requested_teams", "labels", "milestone", "commits_url", "review_comments_url",
	"review_comment_url", "comments_url", "statuses_url", "head", "base", "_links", "author_association", "auto_merge",
	"active_lock_reason", "draft", "merged", "mergeable", "rebaseable", "mergeable_state", "merged_by", "comments",
	"review_comments", "maintainer_can_modify", "commits", "additions", "deletions", "changed_files"}

// hookPull is a pull request as its webhook shows it.
func (s *Server) hookPull(rm *repoMeta, is *issue) map[string]any {
	p := s.fullPullJSON(rm, is)
	p["user"] = s.hookUser(is.User)
	p["active_lock_reason"], p["rebaseable"] = nil, nil
	if is.Pull.MergedBy != "" {
		p["merged_by"] = s.hookUser(is.Pull.MergedBy)
	}
	if am, ok := p["auto_merge"].(map[string]any); ok {
		am["enabled_by"] = s.hookUser(firstNonEmpty(is.Pull.AutoMergeBy, is.User))
		p["auto_merge"] = pick(am, "enabled_by", "merge_method", "commit_title", "commit_message")
	}
	var labels []any
	for _, l := range s.labelsJSON(rm, is.Labels) {
		labels = append(labels, pick(asMap(l), "id", "node_id", "url", "name", "description", "color", "default"))
	}
	p["labels"] = append([]any{}, labels...)
	for _, side := range []string{"head", "base"} {
		if b, ok := p[side].(map[string]any); ok {
			b["repo"], b["user"] = s.hookRepo(rm, false), s.hookUser(rm.Owner)
			p[side] = pick(b, "label", "ref", "sha", "user", "repo")
		}
	}
	return pick(p, hookPullKeys...)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pullChange is what an edit changed of a pull request (the edited event's changes).
type pullChange struct {
	title, body      *string // edited: the title and body before
	baseRef, baseSHA string  // edited: the base before, when baseChanged
	baseChanged      bool
	before, after    string // synchronize: the head before and after
}

// pullRequestPayloadLocked is the pull_request event of action on is by actor; ch says what an
// edit changed (edited) or where the head moved (synchronize).
// https://docs.github.com/webhooks/webhook-events-and-payloads#pull_request
func (s *Server) pullRequestPayloadLocked(rm *repoMeta, is *issue, action, actor string, ch pullChange) map[string]any {
	out := map[string]any{"action": action, "number": is.Number, "pull_request": s.hookPull(rm, is)}
	switch action {
	case "edited":
		changes := map[string]any{}
		if ch.title != nil {
			changes["title"] = map[string]any{"from": *ch.title}
		}
		if ch.body != nil {
			changes["body"] = map[string]any{"from": *ch.body}
		}
		if ch.baseChanged {
			changes["base"] = map[string]any{"ref": map[string]any{"from": ch.baseRef}, "sha": map[string]any{"from": ch.baseSHA}}
		}
		out["changes"] = changes
	case "synchronize":
		out["before"], out["after"] = ch.before, ch.after
	}
	return s.hookEnvelope(out, rm, actor, false)
}

// statusPayloadLocked is the status event of a commit status created.
// https://docs.github.com/webhooks/webhook-events-and-payloads#status
func (s *Server) statusPayloadLocked(rm *repoMeta, st *commitStatus) map[string]any {
	nullable := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	out := map[string]any{
		"id": st.ID, "sha": st.SHA, "name": rm.fullName(), "target_url": nullable(st.TargetURL), "context": st.Context,
		"description": nullable(st.Description), "state": st.State,
		"avatar_url": s.userJSON(st.Creator).GetAvatarURL(),
		"created_at": st.CreatedAt.UTC().Format(time.RFC3339), "updated_at": st.CreatedAt.UTC().Format(time.RFC3339),
		"commit": nil, "branches": []any{},
	}
	if g, err := s.openRepoGit(rm); err == nil {
		if c, err := g.commit(plumbing.NewHash(st.SHA)); err == nil {
			out["commit"] = s.hookStatusCommit(rm, c)
		}
		branches, _ := g.branches()
		var list []any
		for _, name := range slices.Sorted(maps.Keys(branches)) {
			if branches[name].String() == st.SHA {
				list = append(list, map[string]any{"name": name, "protected": rm.Protection[name] != nil,
					"commit": map[string]any{"sha": st.SHA, "url": s.repoAPI(rm) + "/commits/" + st.SHA}})
			}
		}
		if list != nil {
			out["branches"] = list
		}
	}
	return s.hookEnvelope(out, rm, st.Creator, false)
}

// hookStatusCommit is the commit of a status event.
func (s *Server) hookStatusCommit(rm *repoMeta, c *object.Commit) map[string]any {
	full := s.fullRepoCommitJSON(rm, c)
	out := pick(full, "sha", "node_id", "url", "html_url", "comments_url", "author", "committer", "parents")
	for _, k := range []string{"author", "committer"} {
		if u, ok := out[k].(map[string]any); ok {
			out[k] = pick(u, hookUserKeys...)
		}
	}
	var parents []any
	for _, p := range c.ParentHashes {
		parents = append(parents, map[string]any{"sha": p.String(), "url": s.repoAPI(rm) + "/commits/" + p.String(),
			"html_url": s.URL + "/" + rm.fullName() + "/commit/" + p.String()})
	}
	out["parents"] = append([]any{}, parents...)
	gc, _ := full["commit"].(map[string]any)
	commit := pick(gc, "message", "url", "comment_count")
	for _, k := range []string{"author", "committer"} {
		if a, ok := gc[k].(map[string]any); ok {
			commit[k] = pick(a, "name", "email", "date")
		}
	}
	if tree, ok := gc["tree"].(map[string]any); ok {
		commit["tree"] = pick(tree, "sha", "url")
	}
	if v, ok := gc["verification"].(map[string]any); ok {
		commit["verification"] = pick(v, "verified", "reason", "signature", "payload")
	}
	out["commit"] = commit
	return out
}

// hookInstallation is the App's installation as an installation event shows it.
func (s *Server) hookInstallation(in *installation) map[string]any {
	out := pick(s.fullInstallationJSON(in), "id", "repository_selection", "access_tokens_url", "repositories_url",
		"html_url", "app_id", "app_slug", "target_id", "target_type", "permissions", "events", "created_at", "updated_at",
		"single_file_name", "suspended_by", "suspended_at")
	out["account"] = s.hookUser(in.Account)
	return out
}

// installationPayloadLocked is the installation event of action on installation id.
// https://docs.github.com/webhooks/webhook-events-and-payloads#installation
func (s *Server) installationPayloadLocked(action string, id int64) map[string]any {
	out := map[string]any{"action": action, "sender": s.hookUser(DefaultUser)}
	in := s.st.Installations[id]
	if in == nil {
		return out
	}
	out["installation"] = s.hookInstallation(in)
	repos := []any{}
	for _, k := range slices.Sorted(maps.Keys(s.st.Repos)) {
		if rm := s.st.Repos[k]; strings.EqualFold(rm.Owner, in.Account) {
			repos = append(repos, map[string]any{"id": rm.ID, "node_id": nodeID("Repository", rm.ID), "name": rm.Name,
				"full_name": rm.fullName(), "private": rm.Visibility != "public"})
		}
	}
	out["repositories"] = repos
	return out
}

// hookApp is the fake's App as a check run or suite of a webhook shows it.
func (s *Server) hookApp(at time.Time) map[string]any {
	a := s.appJSON(at)
	a["owner"] = s.hookUser(DefaultUser)
	a["events"] = slices.DeleteFunc(slices.Clone(s.appEvents()), func(e string) bool {
		// installation events are sent to every App; GitHub does not list them among an App's events.
		return e == "installation" || e == "installation_repositories"
	})
	return pick(a, "id", "slug", "node_id", "owner", "name", "description", "external_url", "html_url", "created_at",
		"updated_at", "permissions", "events")
}

// hookCheckSuite is the check suite of a check run (the fake keeps one suite per run: its id).
func (s *Server) hookCheckSuite(rm *repoMeta, cr *checkRun, full bool) map[string]any {
	at := cr.StartedAt.UTC().Format(time.RFC3339)
	status, conclusion := "in_progress", any(nil)
	if cr.Status == "completed" {
		status, conclusion = "completed", cr.Conclusion
		if cr.Conclusion == "skipped" {
			conclusion = "neutral" // a suite of skipped runs concludes neutral
		}
	} else if cr.Status == "queued" {
		status = "queued"
	}
	out := map[string]any{
		"id": cr.ID, "node_id": nodeID("CheckSuite", cr.ID), "head_branch": nil, "head_sha": cr.HeadSHA,
		"status": status, "conclusion": conclusion, "url": fmt.Sprintf("%s/check-suites/%d", s.repoAPI(rm), cr.ID),
		"before": nil, "after": nil, "pull_requests": []any{}, "app": s.hookApp(cr.StartedAt),
		"created_at": at, "updated_at": at,
	}
	if full {
		out["latest_check_runs_count"] = 1
		out["check_runs_url"] = fmt.Sprintf("%s/check-suites/%d/check-runs", s.repoAPI(rm), cr.ID)
		if g, err := s.openRepoGit(rm); err == nil {
			if c, err := g.commit(plumbing.NewHash(cr.HeadSHA)); err == nil {
				out["head_commit"] = map[string]any{
					"id": c.Hash.String(), "tree_id": c.TreeHash.String(), "message": c.Message,
					"timestamp": c.Committer.When.UTC().Format(time.RFC3339),
					"author":    map[string]any{"name": c.Author.Name, "email": c.Author.Email},
					"committer": map[string]any{"name": c.Committer.Name, "email": c.Committer.Email},
				}
			}
		}
	}
	return out
}

// hookCheckRun is a check run as its webhook shows it.
func (s *Server) hookCheckRun(rm *repoMeta, cr *checkRun) map[string]any {
	full := s.fullCheckRunJSON(rm, cr)
	out := pick(full, "id", "node_id", "head_sha", "external_id", "url", "html_url", "details_url", "status",
		"conclusion", "started_at", "completed_at", "name")
	if cr.DetailsURL == "" {
		delete(out, "details_url")
	}
	output, _ := full["output"].(map[string]any)
	out["output"] = pick(output, "title", "summary", "text", "annotations_count", "annotations_url")
	out["app"] = s.hookApp(cr.StartedAt)
	out["check_suite"] = s.hookCheckSuite(rm, cr, false)
	out["pull_requests"] = s.checkRunPullsLocked(rm, cr.HeadSHA)
	return out
}

// checkRunPullsLocked are the pull requests of a check run (REST pull-request-minimal, webhook
// check-run-pull-request: the same shape): the open pull requests of its repository whose head
// is the run's commit.
// https://docs.github.com/rest/checks/runs#get-a-check-run
func (s *Server) checkRunPullsLocked(rm *repoMeta, sha string) []any {
	repo := map[string]any{"id": rm.ID, "url": s.repoAPI(rm), "name": rm.Name}
	out := []any{}
	for _, n := range slices.Sorted(maps.Keys(rm.Issues)) {
		is := rm.Issues[n]
		if is.Pull == nil || is.State != "open" || is.Pull.HeadSHA != sha {
			continue
		}
		p := s.pullJSON(rm, is)
		out = append(out, map[string]any{
			"id": is.ID, "number": is.Number, "url": p.GetURL(),
			"head": map[string]any{"ref": is.Pull.Head, "sha": is.Pull.HeadSHA, "repo": repo},
			"base": map[string]any{"ref": is.Pull.Base, "sha": p.GetBase().GetSHA(), "repo": repo},
		})
	}
	return out
}

// checkRunPayloadLocked is the check_run event of action on cr by sender.
// https://docs.github.com/webhooks/webhook-events-and-payloads#check_run
func (s *Server) checkRunPayloadLocked(rm *repoMeta, cr *checkRun, action, sender string) map[string]any {
	return s.hookEnvelope(map[string]any{"action": action, "check_run": s.hookCheckRun(rm, cr)}, rm, sender, false)
}

// checkSuitePayloadLocked is the check_suite event of action on the suite of cr.
// https://docs.github.com/webhooks/webhook-events-and-payloads#check_suite
func (s *Server) checkSuitePayloadLocked(rm *repoMeta, cr *checkRun, action, sender string) map[string]any {
	return s.hookEnvelope(map[string]any{"action": action, "check_suite": s.hookCheckSuite(rm, cr, true)}, rm, sender, false)
}
