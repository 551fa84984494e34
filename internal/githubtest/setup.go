package githubtest

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// The helpers below set up and inspect state directly (no HTTP, nothing in the request log),
// so a test can arrange a scene in a line. In a test (NewServer) a failing helper fails the
// test; in a program it logs the error and returns the zero value.

func (s *Server) fail(err error) {
	if s.tb != nil {
		s.tb.Helper()
		s.tb.Fatalf("fake github: %v", err)
		return
	}
	s.cfg.logger.Error("fake github helper", "err", err)
}

// Client returns a go-github client for the REST API authenticated with DefaultToken.
func (s *Server) Client() *github.Client { return s.ClientWithToken(DefaultToken) }

// ClientWithToken returns a go-github client for the REST API authenticated with token.
func (s *Server) ClientWithToken(token string) *github.Client {
	var hc *http.Client // nil: http.DefaultClient
	if s.cfg.tls && s.hs != nil {
		hc = s.hs.Client() // trusts the server's certificate
	}
	c, err := github.NewClient(hc).WithAuthToken(token).WithEnterpriseURLs(s.APIURL(), s.URL+"/api/uploads/")
	if err != nil {
		s.fail(err)
		return nil
	}
	return c
}

// GitURL is the clone URL of a repository with DefaultToken embedded as x-access-token.
func (s *Server) GitURL(owner, repo string) string {
	return s.GitURLWithToken(owner, repo, DefaultToken)
}

// GitURLWithToken is the clone URL of a repository with token embedded as x-access-token.
func (s *Server) GitURLWithToken(owner, repo, token string) string {
	u, err := url.Parse(s.URL)
	if err != nil {
		s.fail(err)
		return ""
	}
	u.User = url.UserPassword("x-access-token", token)
	u.Path = "/" + owner + "/" + repo + ".git"
	return u.String()
}

// CreateOrg creates an organization (DefaultUser is its admin), installs the App on it and returns
// the installation id. Creating an existing org only returns its installation.
func (s *Server) CreateOrg(name string) int64 {
	defer s.flushEvents()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.ensureAccountLocked(name, "Organization")
	if a.Members == nil {
		a.Members = map[string]string{strings.ToLower(DefaultUser): "admin"}
	}
	id := s.installLocked(a.Login)
	s.persistLocked()
	return id
}

// CreateUser creates a user and returns a new personal access token for it.
func (s *Server) CreateUser(login string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureAccountLocked(login, "User")
	token := "ghp_" + strings.ToLower(login) + "_" + deliveryID()[:8]
	s.st.Tokens[token] = &accessToken{Token: token, Login: login}
	s.persistLocked()
	return token
}

// AddToken makes token a personal access token of login (creating the user).
func (s *Server) AddToken(login, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureAccountLocked(login, "User")
	s.st.Tokens[token] = &accessToken{Token: token, Login: login}
	s.persistLocked()
}

// InstallationToken mints an installation access token for the App's installation on account,
// as POST /app/installations/{id}/access_tokens would.
func (s *Server) InstallationToken(account string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, account) {
			tok := s.mintTokenLocked(in.ID).Token
			s.persistLocked()
			return tok
		}
	}
	s.fail(fmt.Errorf("the app is not installed on %s", account))
	return ""
}

// CreateTeam creates a team in org (creating the org if needed) with members (role member).
func (s *Server) CreateTeam(org, slug string, members ...string) {
	s.CreateOrg(org)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := teamKey(org, slug)
	if s.st.Teams[key] == nil {
		s.st.Teams[key] = &team{ID: s.st.nextID(), Org: s.st.Accounts[strings.ToLower(org)].Login, Slug: slug, Name: slug,
			Privacy: "closed", Members: map[string]string{}, Repos: map[string]string{}}
	}
	for _, m := range members {
		s.addTeamMemberLocked(org, slug, m, "member")
	}
	s.persistLocked()
}

// AddTeamMember adds login (created if needed) to a team with role member or maintainer.
func (s *Server) AddTeamMember(org, slug, login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Teams[teamKey(org, slug)] == nil {
		s.fail(fmt.Errorf("team %s/%s not found", org, slug))
		return
	}
	s.addTeamMemberLocked(org, slug, login, role)
	s.persistLocked()
}

func (s *Server) addTeamMemberLocked(org, slug, login, role string) {
	s.ensureAccountLocked(login, "User")
	t := s.st.Teams[teamKey(org, slug)]
	t.Members[strings.ToLower(login)] = role
	if o := s.st.Accounts[strings.ToLower(org)]; o != nil {
		if o.Members == nil {
			o.Members = map[string]string{}
		}
		if _, ok := o.Members[strings.ToLower(login)]; !ok {
			o.Members[strings.ToLower(login)] = "member"
		}
	}
}

// SetTeamRepoPermission grants a team a permission (pull, triage, push, maintain, admin) on a
// repository; "" removes it.
func (s *Server) SetTeamRepoPermission(org, slug, owner, repo, perm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.st.Teams[teamKey(org, slug)]
	if t == nil {
		s.fail(fmt.Errorf("team %s/%s not found", org, slug))
		return
	}
	if perm == "" {
		delete(t.Repos, repoKey(owner, repo))
	} else {
		t.Repos[repoKey(owner, repo)] = perm
	}
	s.persistLocked()
}

// TeamPermissions returns team slug -> permission on a repository.
func (s *Server) TeamPermissions(owner, repo string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, t := range s.orgTeams(owner) {
		if perm, ok := t.Repos[repoKey(owner, repo)]; ok {
			out[t.Slug] = perm
		}
	}
	return out
}

// CreateRepo creates owner/name (creating owner as an organization if unknown). With files it
// commits them to the default branch (main) as DefaultUser; without, the repository is empty.
func (s *Server) CreateRepo(owner, name string, files map[string]string) {
	s.mu.Lock()
	if s.st.Accounts[strings.ToLower(owner)] == nil {
		s.mu.Unlock()
		s.CreateOrg(owner)
		s.mu.Lock()
	}
	_, err := s.createRepoLocked(owner, name, "private", "", false, DefaultUser)
	s.mu.Unlock()
	if err != nil {
		s.fail(fmt.Errorf("creating %s/%s: %w", owner, name, err))
		return
	}
	if len(files) > 0 {
		s.Commit(owner, name, "main", "Initial commit", files)
	}
	s.mu.Lock()
	s.persistLocked()
	s.mu.Unlock()
}

// Commit commits files (path -> content) to branch, creating it from nothing if missing, authored
// by DefaultUser like a human commit (not verified). deletes lists paths to remove. It returns the
// new commit SHA; webhooks fire and pull requests update as for a push.
func (s *Server) Commit(owner, repo, branch, message string, files map[string]string, deletes ...string) string {
	return s.CommitAs(DefaultUser, owner, repo, branch, message, files, deletes...)
}

// CommitAs is Commit authored by login.
func (s *Server) CommitAs(login, owner, repo, branch, message string, files map[string]string, deletes ...string) string {
	defer s.flushEvents()
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		s.fail(fmt.Errorf("repository %s/%s not found", owner, repo))
		return ""
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		s.fail(err)
		return ""
	}
	changes := map[string][]byte{}
	for p, c := range files {
		changes[p] = []byte(c)
	}
	for _, p := range deletes {
		changes[p] = nil
	}
	s.ensureAccountLocked(login, "User")
	author := &object.Signature{Name: login, Email: s.noreplyEmail(login), When: s.clock.Now()}
	h, err := s.commitFilesLocked(rm, g, branch, changes, author, message, login, "setup")
	if err != nil {
		s.fail(fmt.Errorf("committing to %s/%s %s: %w", owner, repo, branch, err))
		return ""
	}
	s.persistLocked()
	return h.String()
}

// File returns a file's content at ref (branch, tag or SHA) and whether it exists.
func (s *Server) File(owner, repo, ref, path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return "", false
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return "", false
	}
	c, err := g.resolveCommit(ref)
	if err != nil {
		return "", false
	}
	data, _, err := g.readFile(c, path)
	if err != nil {
		return "", false
	}
	return string(data), true
}

// Files returns every file (path -> content) at ref; nil when the ref does not exist.
func (s *Server) Files(owner, repo, ref string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return nil
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return nil
	}
	c, err := g.resolveCommit(ref)
	if err != nil {
		return nil
	}
	flat, err := g.flatten(c.TreeHash)
	if err != nil {
		s.fail(err)
		return nil
	}
	out := map[string]string{}
	for p, e := range flat {
		data, err := g.blob(e.hash)
		if err != nil {
			s.fail(err)
			return nil
		}
		out[p] = string(data)
	}
	return out
}

// Branch returns the commit SHA of a branch, "" when it does not exist.
func (s *Server) Branch(owner, repo, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return ""
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return ""
	}
	h, ok := g.branch(branch)
	if !ok {
		return ""
	}
	return h.String()
}

// Repo returns a repository as GET /repos/{owner}/{repo} shows it, nil when missing.
func (s *Server) Repo(owner, repo string) *github.Repository {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return nil
	}
	return s.repoJSON(rm)
}

// Pulls returns every pull request of a repository (all states), oldest first.
func (s *Server) Pulls(owner, repo string) []*github.PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return nil
	}
	var out []*github.PullRequest
	for _, n := range slices.Sorted(maps.Keys(rm.Issues)) {
		if is := rm.Issues[n]; is.Pull != nil {
			out = append(out, s.pullJSON(rm, is))
		}
	}
	return out
}

// Comments returns the bodies of the comments on an issue or pull request, oldest first.
func (s *Server) Comments(owner, repo string, number int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return nil
	}
	var out []string
	for _, c := range rm.Comments {
		if c.Number == number {
			out = append(out, c.Body)
		}
	}
	return out
}

// Protected reports whether a branch has protection.
func (s *Server) Protected(owner, repo, branch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	return rm != nil && rm.Protection[branch] != nil
}

// SetCollaborator gives login a direct permission on a repository; "" removes it.
func (s *Server) SetCollaborator(owner, repo, login, perm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		s.fail(fmt.Errorf("repository %s/%s not found", owner, repo))
		return
	}
	s.ensureAccountLocked(login, "User")
	if perm == "" {
		delete(rm.Collaborators, strings.ToLower(login))
	} else {
		rm.Collaborators[strings.ToLower(login)] = perm
	}
	s.persistLocked()
}

func (s *Server) persistLocked() {
	if !s.save {
		return
	}
	if err := s.st.save(s.dir); err != nil {
		s.cfg.logger.Error("saving fake github state", "err", err)
	}
}
