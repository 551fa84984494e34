package githubtest

import (
	"encoding/base64"
	"errors"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// repoFromReq finds the repository named by the {owner}/{repo} path values.
func (s *Server) repoFromReq(r *http.Request) (*repoMeta, error) {
	rm := s.st.Repos[repoKey(r.PathValue("owner"), r.PathValue("repo"))]
	if rm == nil {
		return nil, errNotFound
	}
	return rm, nil
}

// writableRepo is repoFromReq for writes: archived repositories are read-only.
func (s *Server) writableRepo(r *http.Request) (*repoMeta, error) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		return nil, err
	}
	if rm.Archived {
		return nil, errArchived
	}
	return rm, nil
}

func (s *Server) ensureAccountLocked(login, typ string) *account {
	a := s.st.Accounts[strings.ToLower(login)]
	if a == nil {
		a = &account{ID: s.st.nextID(), Login: login, Type: typ}
		s.st.Accounts[strings.ToLower(login)] = a
	}
	return a
}

// createRepoLocked creates a repository; autoInit adds a README commit on the default branch.
func (s *Server) createRepoLocked(owner, name, visibility, description string, autoInit bool, actor string) (*repoMeta, error) {
	if name == "" || strings.ContainsAny(name, "/ ") {
		return nil, &httpError{status: http.StatusUnprocessableEntity, message: "Repository creation failed.",
			errors: []fieldError{{Resource: "Repository", Field: "name", Code: "invalid"}}}
	}
	if s.st.Repos[repoKey(owner, name)] != nil {
		return nil, &httpError{status: http.StatusUnprocessableEntity, message: "Repository creation failed.",
			errors: []fieldError{{Resource: "Repository", Field: "name", Code: "custom", Message: "name already exists on this account"}}}
	}
	if visibility == "" {
		visibility = "public"
	}
	now := s.clock.Now()
	rm := &repoMeta{
		ID: s.st.nextID(), Owner: s.st.Accounts[strings.ToLower(owner)].Login, Name: name,
		Description: description, Visibility: visibility, DefaultBranch: "main",
		CreatedAt: now, UpdatedAt: now, PushedAt: now, NextNumber: 1,
		Issues: map[int]*issue{}, Protection: map[string]*protection{}, Collaborators: map[string]string{},
		Verified: map[string]bool{}, Topics: []string{},
	}
	if err := initBare(s.gitDir(rm), rm.DefaultBranch); err != nil {
		return nil, err
	}
	s.st.Repos[repoKey(owner, name)] = rm
	if autoInit {
		g, err := s.openRepoGit(rm)
		if err != nil {
			return nil, err
		}
		content := "# " + name + "\n"
		if description != "" {
			content += "\n" + description + "\n"
		}
		if _, err := s.commitFilesLocked(rm, g, rm.DefaultBranch, map[string][]byte{"README.md": []byte(content)}, nil, "Initial commit", actor, "contents"); err != nil {
			return nil, err
		}
	}
	return rm, nil
}

type createRepoRequest struct {
	Name          string  `json:"name"`
	Description   string  `json:"description"`
	Private       *bool   `json:"private"`
	Visibility    string  `json:"visibility"`
	AutoInit      bool    `json:"auto_init"`
	DefaultBranch *string `json:"default_branch"`
	// AllowAutoMerge is off unless the request turns it on, as on GitHub.
	AllowAutoMerge *bool `json:"allow_auto_merge"`
	// CustomProperties are the new repository's custom property values.
	CustomProperties map[string]any `json:"custom_properties"`
	mergeSettings
}

func (req createRepoRequest) visibility() string {
	switch {
	case req.Visibility != "":
		return req.Visibility
	case req.Private != nil && *req.Private:
		return "private"
	}
	return "public"
}

func (s *Server) handleCreateOrgRepo(w http.ResponseWriter, r *http.Request) {
	org := s.st.Accounts[strings.ToLower(r.PathValue("org"))]
	if org == nil || org.Type != "Organization" {
		writeErr(w, errNotFound)
		return
	}
	var req createRepoRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if herr := s.checkVisibilityLocked(org.Login, req.visibility()); herr != nil {
		writeErr(w, herr)
		return
	}
	if herr := s.setPropertiesLocked(&repoMeta{Owner: org.Login}, req.CustomProperties); len(req.CustomProperties) > 0 && herr != nil {
		writeErr(w, herr) // nothing created
		return
	}
	rm, err := s.createRepoLocked(org.Login, req.Name, req.visibility(), req.Description, req.AutoInit, principalOf(r).login)
	if err != nil {
		writeErr(w, err)
		return
	}
	rm.AllowAutoMerge = req.AllowAutoMerge != nil && *req.AllowAutoMerge
	req.mergeSettings.apply(rm)
	if len(req.CustomProperties) > 0 {
		_ = s.setPropertiesLocked(rm, req.CustomProperties) // checked before the create
	}
	writeJSON(w, http.StatusCreated, s.fullRepoJSON(rm))
}

func (s *Server) handleCreateUserRepo(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if p.kind != "user" {
		writeErr(w, errorf(http.StatusForbidden, "Resource not accessible by integration"))
		return
	}
	var req createRepoRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if herr := s.checkVisibilityLocked(p.login, req.visibility()); herr != nil {
		writeErr(w, herr)
		return
	}
	rm, err := s.createRepoLocked(p.login, req.Name, req.visibility(), req.Description, req.AutoInit, p.login)
	if err != nil {
		writeErr(w, err)
		return
	}
	rm.AllowAutoMerge = req.AllowAutoMerge != nil && *req.AllowAutoMerge
	req.mergeSettings.apply(rm)
	writeJSON(w, http.StatusCreated, s.fullRepoJSON(rm))
}

func (s *Server) handleGetRepo(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullRepoJSON(rm))
}

func (s *Server) handleEditRepo(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Archived      *bool   `json:"archived"`
		DefaultBranch *string `json:"default_branch"`
		Description   *string `json:"description"`
		Private       *bool   `json:"private"`
		Visibility    *string `json:"visibility"`
		AllowAuto     *bool   `json:"allow_auto_merge"`
		mergeSettings
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if rm.Archived && (req.Archived == nil || *req.Archived) {
		writeErr(w, errArchived)
		return
	}
	if req.DefaultBranch != nil && *req.DefaultBranch != rm.DefaultBranch {
		g, err := s.openRepoGit(rm)
		if err != nil {
			writeErr(w, err)
			return
		}
		if _, ok := g.branch(*req.DefaultBranch); !ok && !g.empty() {
			writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
				errors: []fieldError{{Resource: "Repository", Field: "default_branch", Code: "invalid"}}})
			return
		}
		if err := g.setHead(*req.DefaultBranch); err != nil {
			writeErr(w, err)
			return
		}
		rm.DefaultBranch = *req.DefaultBranch
	}
	if req.Archived != nil {
		rm.Archived = *req.Archived
	}
	if req.Description != nil {
		rm.Description = *req.Description
	}
	if req.Private != nil {
		rm.Visibility = map[bool]string{true: "private", false: "public"}[*req.Private]
	}
	if req.Visibility != nil {
		if herr := s.checkVisibilityLocked(rm.Owner, *req.Visibility); herr != nil {
			writeErr(w, herr)
			return
		}
		rm.Visibility = *req.Visibility
	}
	if req.AllowAuto != nil {
		rm.AllowAutoMerge = *req.AllowAuto
	}
	req.mergeSettings.apply(rm)
	rm.UpdatedAt = s.clock.Now()
	writeJSON(w, http.StatusOK, s.fullRepoJSON(rm))
}

// handleListRepos serves /orgs/{org}/repos, /users/{username}/repos and /user/repos.
func (s *Server) handleListRepos(w http.ResponseWriter, r *http.Request) {
	owner := r.PathValue("org") + r.PathValue("username")
	if owner == "" {
		owner = principalOf(r).login
	}
	if s.st.Accounts[strings.ToLower(owner)] == nil {
		writeErr(w, errNotFound)
		return
	}
	var rms []*repoMeta
	for _, rm := range s.st.Repos {
		if strings.EqualFold(rm.Owner, owner) {
			rms = append(rms, rm)
		}
	}
	q := r.URL.Query()
	switch q.Get("sort") {
	case "full_name":
		sort.Slice(rms, func(i, j int) bool { return rms[i].Name < rms[j].Name })
	default:
		sort.Slice(rms, func(i, j int) bool { return rms[i].ID < rms[j].ID })
	}
	if q.Get("direction") == "desc" || (q.Get("direction") == "" && q.Get("sort") != "full_name" && q.Get("sort") != "") {
		slices.Reverse(rms)
	}
	// Only the requested page is turned into JSON: repoJSON measures each
	// repo on disk, and listing a fleet of a thousand repos page by page
	// must not cost a thousand measurements per page.
	page, link := paginate(r, rms)
	out := make([]map[string]any, 0, len(page))
	for _, rm := range page {
		out = append(out, s.fullRepoJSON(rm))
	}
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleTopics(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err == nil && r.Method == http.MethodPut {
		rm, err = s.writableRepo(r)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	if r.Method == http.MethodPut {
		var req struct {
			Names []string `json:"names"`
		}
		if err := decodeBody(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		topics, herr := normalizeTopics(req.Names)
		if herr != nil {
			writeErr(w, herr)
			return
		}
		rm.Topics = topics
		rm.UpdatedAt = s.clock.Now()
	}
	writeJSON(w, http.StatusOK, map[string][]string{"names": rm.Topics})
}

func (s *Server) branchJSON(rm *repoMeta, g *gitRepo, name string, h plumbing.Hash) (*github.Branch, error) {
	c, err := g.commit(h)
	if err != nil {
		return nil, err
	}
	return &github.Branch{
		Name:      github.String(name),
		Commit:    s.repoCommitJSON(rm, c),
		Protected: github.Bool(rm.Protection[name] != nil),
	}, nil
}

func (s *Server) handleListBranches(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	branches, err := g.branches()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []*github.Branch{}
	for _, name := range slices.Sorted(maps.Keys(branches)) {
		b, err := s.branchJSON(rm, g, name, branches[name])
		if err != nil {
			writeErr(w, err)
			return
		}
		out = append(out, b)
	}
	writePage(w, r, out)
}

func (s *Server) handleGetBranch(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	name := r.PathValue("branch")
	h, ok := g.branch(name)
	if !ok {
		writeErr(w, errorf(http.StatusNotFound, "Branch not found"))
		return
	}
	c, err := g.commit(h)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullBranchJSON(rm, name, c))
}

// repoGit finds the request's repository and opens its git storage.
func (s *Server) repoGit(r *http.Request) (*repoMeta, *gitRepo, error) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		return nil, nil, err
	}
	g, err := s.openRepoGit(rm)
	return rm, g, err
}

func (s *Server) contentJSON(rm *repoMeta, p string, e object.TreeEntry, size int64, data []byte, ref string) *github.RepositoryContent {
	typ := "file"
	switch e.Mode {
	case filemode.Dir:
		typ = "dir"
	case filemode.Symlink:
		typ = "symlink"
	case filemode.Submodule:
		typ = "submodule"
	}
	api := s.repoAPI(rm) + "/contents/" + p + "?ref=" + ref
	c := &github.RepositoryContent{
		Type:    github.String(typ),
		Name:    github.String(path.Base(p)),
		Path:    github.String(p),
		SHA:     github.String(e.Hash.String()),
		Size:    github.Int(int(size)),
		URL:     github.String(api),
		HTMLURL: github.String(s.URL + "/" + rm.fullName() + "/blob/" + ref + "/" + p),
		GitURL:  github.String(s.repoAPI(rm) + "/git/blobs/" + e.Hash.String()),
	}
	if data != nil {
		c.Encoding = github.String("base64")
		c.Content = github.String(base64.StdEncoding.EncodeToString(data))
	}
	return c
}

func (s *Server) handleGetContents(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if g.empty() {
		writeErr(w, errorf(http.StatusNotFound, "This repository is empty."))
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = rm.DefaultBranch
	}
	c, err := g.resolveCommit(ref)
	if err != nil {
		writeErr(w, errorf(http.StatusNotFound, "No commit found for the ref %s", ref))
		return
	}
	p := strings.Trim(r.PathValue("path"), "/")
	tree, err := c.Tree()
	if err != nil {
		writeErr(w, err)
		return
	}
	if p != "" {
		e, err := tree.FindEntry(p)
		if err != nil {
			writeErr(w, errNotFound)
			return
		}
		if e.Mode != filemode.Dir {
			data, err := g.blob(e.Hash)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, http.StatusOK, s.fullContentJSON(rm, p, asMap(s.contentJSON(rm, p, *e, int64(len(data)), data, ref)), ref))
			return
		}
		if tree, err = object.GetTree(g.st, e.Hash); err != nil {
			writeErr(w, err)
			return
		}
	}
	out := []map[string]any{}
	for _, e := range tree.Entries {
		var size int64
		if e.Mode != filemode.Dir {
			if o, err := g.st.EncodedObject(plumbing.AnyObject, e.Hash); err == nil {
				size = o.Size()
			}
		}
		ep := path.Join(p, e.Name)
		out = append(out, s.fullContentJSON(rm, ep, asMap(s.contentJSON(rm, ep, e, size, nil, ref)), ref))
	}
	writeJSON(w, http.StatusOK, out)
}

type signatureRequest struct {
	Name  string     `json:"name"`
	Email string     `json:"email"`
	Date  *time.Time `json:"date"`
}

func (sr *signatureRequest) signature(now time.Time) *object.Signature {
	if sr == nil || sr.Name == "" || sr.Email == "" {
		return nil
	}
	when := now
	if sr.Date != nil {
		when = *sr.Date
	}
	return &object.Signature{Name: sr.Name, Email: sr.Email, When: when}
}

func (s *Server) handlePutContents(w http.ResponseWriter, r *http.Request) {
	rm, err := s.writableRepo(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Message   string            `json:"message"`
		Content   string            `json:"content"`
		SHA       string            `json:"sha"`
		Branch    string            `json:"branch"`
		Author    *signatureRequest `json:"author"`
		Committer *signatureRequest `json:"committer"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	data, err := base64.StdEncoding.DecodeString(req.Content)
	if err != nil || req.Message == "" {
		writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Invalid request.\n\ncontent is not valid Base64"})
		return
	}
	p := strings.Trim(r.PathValue("path"), "/")
	branch := req.Branch
	if branch == "" {
		branch = rm.DefaultBranch
	}
	head, exists := g.branch(branch)
	if !exists && !g.empty() {
		writeErr(w, errorf(http.StatusNotFound, "Branch %s not found", branch))
		return
	}
	status := http.StatusCreated
	if exists {
		c, err := g.commit(head)
		if err != nil {
			writeErr(w, err)
			return
		}
		_, blobSHA, err := g.readFile(c, p)
		switch {
		case err == nil && req.SHA == "":
			writeErr(w, errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n\"sha\" wasn't supplied."))
			return
		case err == nil && req.SHA != blobSHA.String():
			writeErr(w, errorf(http.StatusConflict, "%s does not match %s", p, req.SHA))
			return
		case err == nil:
			status = http.StatusOK
		case !errors.Is(err, os.ErrNotExist):
			writeErr(w, err)
			return
		}
	}
	now := s.clock.Now()
	author := req.Author.signature(now)
	if author == nil {
		author = req.Committer.signature(now)
	}
	h, err := s.commitFilesLocked(rm, g, branch, map[string][]byte{p: data}, author, req.Message, principalOf(r).login, "contents")
	if err != nil {
		writeErr(w, err)
		return
	}
	c, err := g.commit(h)
	if err != nil {
		writeErr(w, err)
		return
	}
	blob, _ := g.writeBlob(data)
	writeJSON(w, status, &github.RepositoryContentResponse{
		Content: s.contentJSON(rm, p, object.TreeEntry{Mode: filemode.Regular, Hash: blob}, int64(len(data)), nil, branch),
		Commit:  *s.gitCommitJSON(rm, c),
	})
}

// commitFilesLocked commits files (nil content deletes) on top of branch (creating it, also in
// an empty repository) and moves the branch, as the contents API and the test helpers do.
// A nil author makes the actor the author and the commit verified.
func (s *Server) commitFilesLocked(rm *repoMeta, g *gitRepo, branch string, files map[string][]byte, author *object.Signature, message, actor, via string) (plumbing.Hash, error) {
	var parents []plumbing.Hash
	var flat map[string]flatEntry
	head, ok := g.branch(branch)
	if ok {
		c, err := g.commit(head)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		parents = []plumbing.Hash{head}
		if flat, err = g.flatten(c.TreeHash); err != nil {
			return plumbing.ZeroHash, err
		}
	} else {
		flat = map[string]flatEntry{}
	}
	for p, data := range files {
		p = strings.Trim(p, "/")
		if data == nil {
			delete(flat, p)
			continue
		}
		h, err := g.writeBlob(data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		flat[p] = flatEntry{mode: filemode.Regular, hash: h}
	}
	tree, err := g.buildTree(flat)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := s.newCommitLocked(rm, g, tree, parents, message, author, nil, actor)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return h, s.moveRefLocked(rm, g, "refs/heads/"+branch, h, actor, refHow{via, GuardServer})
}

// newCommitLocked writes a commit. Without author and committer, GitHub records and signs it
// as apiCommitIdentityLocked says (an App's commits are verified, a user's are not).
func (s *Server) newCommitLocked(rm *repoMeta, g *gitRepo, tree plumbing.Hash, parents []plumbing.Hash, message string, author, committer *object.Signature, actor string) (plumbing.Hash, error) {
	now := s.clock.Now()
	verified := false
	if actor == "" {
		actor = s.botLogin()
	}
	if author == nil && committer == nil {
		author, committer, verified = s.apiCommitIdentityLocked(actor, now)
	}
	if author == nil {
		author = &object.Signature{Name: actor, Email: s.noreplyEmail(actor), When: now}
	}
	if committer == nil {
		committer = author
	}
	h, err := g.writeCommit(&object.Commit{Author: *author, Committer: *committer, Message: message,
		TreeHash: tree, ParentHashes: parents})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if verified {
		rm.Verified[h.String()] = true
	}
	return h, nil
}

// moveRefLocked sets a ref and applies the consequences (pull requests, webhooks, the ref-move
// log), how says through which door and with which guard.
func (s *Server) moveRefLocked(rm *repoMeta, g *gitRepo, name string, h plumbing.Hash, actor string, how refHow) error {
	before, _ := g.ref(name)
	if h.IsZero() {
		if err := g.deleteRef(name); err != nil {
			return err
		}
	} else if err := g.setRef(name, h); err != nil {
		return err
	}
	return s.refsChangedLocked(rm, g, []refChange{{name: name, before: before, after: h, how: how}}, actor)
}

func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if g.empty() {
		writeErr(w, errEmptyRepo)
		return
	}
	basehead := r.PathValue("basehead")
	baseRev, headRev, ok := strings.Cut(basehead, "...")
	if !ok {
		writeErr(w, errNotFound)
		return
	}
	strip := func(rev string) string {
		if _, after, ok := strings.Cut(rev, ":"); ok {
			return after
		}
		return rev
	}
	base, err := g.resolveCommit(strip(baseRev))
	if err != nil {
		writeErr(w, errNotFound)
		return
	}
	head, err := g.resolveCommit(strip(headRev))
	if err != nil {
		writeErr(w, errNotFound)
		return
	}
	mb, err := g.mergeBase(base.Hash, head.Hash)
	if err != nil {
		writeErr(w, err)
		return
	}
	ahead, err := g.reachable(head.Hash, base.Hash)
	if err != nil {
		writeErr(w, err)
		return
	}
	behind, err := g.reachable(base.Hash, head.Hash)
	if err != nil {
		writeErr(w, err)
		return
	}
	status := "diverged"
	switch {
	case len(ahead) == 0 && len(behind) == 0:
		status = "identical"
	case len(behind) == 0:
		status = "ahead"
	case len(ahead) == 0:
		status = "behind"
	}
	commits := []map[string]any{}
	for i := len(ahead) - 1; i >= 0; i-- {
		commits = append(commits, s.fullRepoCommitJSON(rm, ahead[i]))
	}
	page, link := paginate(r, commits)
	if link != "" {
		w.Header().Set("Link", link)
	}
	cmpURL := s.repoAPI(rm) + "/compare/" + basehead
	html := s.URL + "/" + rm.fullName() + "/compare/" + basehead
	cmp := map[string]any{
		"url":           cmpURL,
		"html_url":      html,
		"permalink_url": s.URL + "/" + rm.fullName() + "/compare/" + rm.Owner + ":" + base.Hash.String()[:7] + "..." + rm.Owner + ":" + head.Hash.String()[:7],
		"diff_url":      html + ".diff",
		"patch_url":     html + ".patch",
		"base_commit":   s.fullRepoCommitJSON(rm, base),
		"status":        status,
		"ahead_by":      len(ahead),
		"behind_by":     len(behind),
		"total_commits": len(ahead),
		"commits":       page,
		"files":         []any{},
	}
	if !mb.IsZero() {
		if c, err := g.commit(mb); err == nil {
			cmp["merge_base_commit"] = s.fullRepoCommitJSON(rm, c)
		}
	}
	writeJSON(w, http.StatusOK, cmp)
}
