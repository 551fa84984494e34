package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// description is the description fleetbot gives the repos it creates; ListManaged reads the
// kind and name back from its marker.
func description(kind fanout.Kind, name string) string {
	return fmt.Sprintf("fleetbot manages this repo for %s %s; change it through the control repo (fleetbot:%s/%s)", kind, name, kind, name)
}

var markerRE = regexp.MustCompile(`fleetbot:(cluster|workspace|management)/([A-Za-z0-9._-]+)`)

// ErrVisibilityInternal is returned when a repo cannot be created with visibility internal:
// only organizations of an enterprise (GitHub Enterprise Cloud) and GitHub Enterprise Server
// have internal repositories.
var ErrVisibilityInternal = errors.New("visibility internal is not available")

// mentionsField reports whether a GitHub validation error names field.
func mentionsField(err error, field string) bool {
	var er *gh.ErrorResponse
	if !errors.As(err, &er) {
		return false
	}
	for _, e := range er.Errors {
		if e.Field == field {
			return true
		}
	}
	return strings.Contains(strings.ToLower(er.Message), field)
}

// ensureOwnTopics gives a repo fleetbot created, whose create answer was lost before the
// topics were set, its topics (read from the marker in its description): without them
// ListManaged would never find it. Other repos are left alone.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#replace-all-repository-topics
func (f *Forge) ensureOwnTopics(ctx context.Context, owner, repo string) error {
	full := owner + "/" + repo
	r, _, err := f.api.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return errf(err, "reading repo", full)
	}
	m := markerRE.FindStringSubmatch(r.GetDescription())
	if m == nil || r.GetDescription() != description(fanout.Kind(m[1]), m[2]) || slices.Contains(r.Topics, ManagedTopic) {
		return nil
	}
	topics := append(slices.Clone(r.Topics), ManagedTopic, kindTopic(fanout.Kind(m[1])))
	if _, _, err := f.api.Repositories.ReplaceAllTopics(ctx, owner, repo, topics); err != nil {
		return errf(err, "setting the topics of", full)
	}
	return nil
}

// kindTopic is the topic naming a managed repo's kind.
func kindTopic(k fanout.Kind) string { return "fleetbot-" + string(k) }

// CreateRepo implements pr.Forge: an empty repo in the org (or the authenticated user's
// account) with the platform's visibility, fleetbot's description and topics. Nobody but the
// org's owners (and fleetbot) can reach it yet: branch protection needs a branch, so it is set
// when the bootstrap commit lands (SetBranch), and only then are the teams of spec.Access
// granted. So the default branch is never reachable by a persona team without its CODEOWNERS
// and its protection, and an interrupted bootstrap leaves a repo only admins can touch, which
// the next run finishes (protection before grants, see ApplyAccess).
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#create-an-organization-repository
func (f *Forge) CreateRepo(ctx context.Context, spec pr.RepoSpec) error {
	full := spec.Owner + "/" + spec.Repo
	e, unlock := f.entry(spec.Owner, spec.Repo)
	defer unlock()
	in := &gh.Repository{
		Name:        gh.String(spec.Repo),
		Description: gh.String(description(spec.Kind, spec.Name)),
		AutoInit:    gh.Bool(false),
		HasWiki:     gh.Bool(false),
		HasProjects: gh.Bool(false),
	}
	if spec.Access.AllowAutoMerge {
		in.AllowAutoMerge = gh.Bool(true) // off unless asked (GitHub's default)
	}
	if len(spec.Access.Properties) > 0 {
		// Set at creation, so the org ruleset targets the repo from its first commit on; the
		// org must define them first.
		if err := f.ensurePropertySchema(ctx, spec.Owner); err != nil {
			return fmt.Errorf("creating repo %s: %w", full, err)
		}
		in.CustomProperties = spec.Access.Properties
	}
	switch spec.Visibility {
	case "", "private":
		in.Private = gh.Bool(true)
	case "public":
		in.Private = gh.Bool(false)
	default:
		in.Visibility = gh.String(spec.Visibility)
	}
	org := spec.Owner
	if strings.EqualFold(spec.Owner, f.selfLogin(ctx)) {
		org = "" // the authenticated user's own account: POST /user/repos
	}
	// A missing team is an error before anything is created, not half a repo.
	if err := f.teamsExist(ctx, spec.Owner, full, spec.Access.Teams); err != nil {
		return err
	}
	r, resp, err := f.createRepo(ctx, org, in)
	if err != nil && statusOf(resp) == http.StatusUnprocessableEntity && spec.Visibility == "internal" && mentionsField(err, "visibility") {
		return fmt.Errorf("creating repo %s: %w: %s is not an organization of an enterprise account (internal repositories exist only there, on GitHub Enterprise Cloud, and on GitHub Enterprise Server); set spec.repos.visibility in platform.yaml to private: %w",
			full, ErrVisibilityInternal, spec.Owner, err)
	}
	if err != nil && statusOf(resp) == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(errMessage(err)), "already exists") {
		// A create whose answer was lost, or a view that was out of date: the repo is there.
		// Continue with it only if it is the one fleetbot made for this target.
		got, _, gerr := f.api.Repositories.Get(ctx, spec.Owner, spec.Repo)
		if gerr != nil {
			return errf(gerr, "reading existing repo", full)
		}
		if got.GetDescription() != description(spec.Kind, spec.Name) {
			return fmt.Errorf("creating repo %s: a repo of that name exists and fleetbot did not create it for %s %s (its description differs): rename or remove it, or adopt it by giving it fleetbot's description %q",
				full, spec.Kind, spec.Name, description(spec.Kind, spec.Name))
		}
		r, err = got, nil
	}
	if err != nil {
		return errf(err, "creating repo", full)
	}
	st := &repoState{
		Version: cacheVersion, DefaultBranch: spec.DefaultBranch, Empty: true, PRRead: true,
		RepoDefault: r.GetDefaultBranch(), NodeID: r.GetNodeID(), // updateRefs names the repo by its node id
	}
	e.st, e.fresh, e.nodeID = st, true, r.GetNodeID()
	topics := []string{ManagedTopic, kindTopic(spec.Kind)}
	if _, _, err := f.api.Repositories.ReplaceAllTopics(ctx, spec.Owner, spec.Repo, topics); err != nil {
		return errf(err, "setting the topics of", full)
	}
	access := spec.Access
	observed := policy.Access{Teams: map[string]policy.Role{}, AllowAutoMerge: r.GetAllowAutoMerge()}
	st.Access, st.AccessAt = &observed, f.opts.Now().Unix()
	e.pendingProtection = access.Protection
	e.pendingRuleset = policy.DesiredRuleset(access)
	e.pendingTeams = access.Teams
	f.saveState(spec.Owner, spec.Repo, st)
	f.log.Debug("created repo", "repo", full)
	return nil
}

// ListManaged implements reconcile.Forge: the repos of owner carrying the fleetbot-managed
// topic, one paginated (and ETag-cached) listing per run, not one request per repo.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#list-organization-repositories
func (f *Forge) ListManaged(ctx context.Context, owner string) ([]pr.ManagedRepo, error) {
	all, err := f.listRepos(ctx, owner)
	if err != nil {
		return nil, err
	}
	return managed(all), nil
}

// listRepos lists every repo of owner, an org or else a user. The pages after the first are
// read concurrently (the first says how many there are): an org of a thousand repos is 11
// pages, and reading them one after another puts 11 round trips before every run's first plan.
func (f *Forge) listRepos(ctx context.Context, owner string) ([]*gh.Repository, error) {
	opts := func(page int) *gh.RepositoryListByOrgOptions {
		return &gh.RepositoryListByOrgOptions{Type: "all", Sort: "full_name", ListOptions: gh.ListOptions{PerPage: PerPage, Page: page}}
	}
	first, resp, err := f.api.Repositories.ListByOrg(ctx, owner, opts(0))
	if IsNotFound(err) {
		return f.listUserRepos(ctx, owner)
	}
	if err != nil {
		return nil, errf(err, "listing the repos of", owner)
	}
	if resp.NextPage == 0 {
		return first, nil
	}
	last := max(resp.LastPage, resp.NextPage)
	pages := make([][]*gh.Repository, last+1)
	errs := make([]error, last+1)
	next := 0 // the last page's NextPage: the list grew while being read
	var wg sync.WaitGroup
	for p := resp.NextPage; p <= last; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r *gh.Response
			pages[p], r, errs[p] = f.api.Repositories.ListByOrg(ctx, owner, opts(p))
			if errs[p] == nil && p == last {
				next = r.NextPage
			}
		}()
	}
	wg.Wait()
	all := first
	for p := resp.NextPage; p <= last; p++ {
		if errs[p] != nil {
			return nil, errf(errs[p], "listing the repos of", owner)
		}
		all = append(all, pages[p]...)
	}
	if next == 0 {
		return all, nil
	}
	tail, err := allPagesFrom(next, func(o gh.ListOptions) ([]*gh.Repository, *gh.Response, error) {
		return f.api.Repositories.ListByOrg(ctx, owner, opts(o.Page))
	})
	if err != nil {
		return nil, errf(err, "listing the repos of", owner)
	}
	return append(all, tail...), nil
}

func (f *Forge) listUserRepos(ctx context.Context, owner string) ([]*gh.Repository, error) {
	all, err := AllPages(func(o gh.ListOptions) ([]*gh.Repository, *gh.Response, error) {
		return f.api.Repositories.ListByUser(ctx, owner, &gh.RepositoryListByUserOptions{Type: "owner", Sort: "full_name", ListOptions: o})
	})
	if err != nil {
		return nil, errf(err, "listing the repos of", owner)
	}
	return all, nil
}

// managed keeps the repos fleetbot manages, with their kind and name.
func managed(rs []*gh.Repository) []pr.ManagedRepo {
	var out []pr.ManagedRepo
	for _, r := range rs {
		var kind fanout.Kind
		ok := false
		for _, t := range r.Topics {
			switch t {
			case ManagedTopic:
				ok = true
			case kindTopic(fanout.KindCluster):
				kind = fanout.KindCluster
			case kindTopic(fanout.KindWorkspace):
				kind = fanout.KindWorkspace
			case kindTopic(fanout.KindManagement):
				kind = fanout.KindManagement
			}
		}
		if !ok || r.GetArchived() {
			continue
		}
		name := ""
		if m := markerRE.FindStringSubmatch(r.GetDescription()); m != nil {
			kind, name = fanout.Kind(m[1]), m[2]
		}
		if kind == "" {
			continue
		}
		if name == "" {
			name = strings.TrimPrefix(r.GetName(), string(kind)+"-")
		}
		out = append(out, pr.ManagedRepo{Kind: kind, Name: name, Repo: r.GetName()})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Repo < out[b].Repo })
	return out
}

// createRepo creates the repo in (POST /orgs/{org}/repos, or /user/repos for org ""), with its
// custom properties when it has any: go-github v62's Create does not send custom_properties.
func (f *Forge) createRepo(ctx context.Context, org string, in *gh.Repository) (*gh.Repository, *gh.Response, error) {
	if len(in.CustomProperties) == 0 || org == "" {
		return f.api.Repositories.Create(ctx, org, in)
	}
	body := map[string]any{
		"name": in.GetName(), "description": in.GetDescription(), "auto_init": in.GetAutoInit(),
		"has_wiki": in.GetHasWiki(), "has_projects": in.GetHasProjects(), "custom_properties": in.CustomProperties,
	}
	if in.Private != nil {
		body["private"] = in.GetPrivate()
	}
	if in.Visibility != nil {
		body["visibility"] = in.GetVisibility()
	}
	if in.AllowAutoMerge != nil {
		body["allow_auto_merge"] = in.GetAllowAutoMerge()
	}
	req, err := f.api.NewRequest(http.MethodPost, "orgs/"+org+"/repos", body)
	if err != nil {
		return nil, nil, err
	}
	r := new(gh.Repository)
	resp, err := f.api.Do(ctx, req, r)
	return r, resp, err
}
