package githubtest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-github/v62/github"
)

// refsChangedLocked applies moved branches to the rest of the state as GitHub does: a deleted
// head branch closes its pull request, a moved head synchronizes it, and a base that now
// contains the head marks the pull request merged. It also queues push webhooks.
func (s *Server) refsChangedLocked(rm *repoMeta, g *gitRepo, changes []refChange, actor string) error {
	now := s.clock.Now()
	sort.Slice(changes, func(i, j int) bool { return changes[i].name < changes[j].name })
	s.recordRefMovesLocked(rm, changes, actor)
	for _, ch := range changes {
		branch, ok := strings.CutPrefix(ch.name, "refs/heads/")
		if !ok {
			continue
		}
		rm.PushedAt = now
		if _, ok := g.branch(rm.DefaultBranch); !ok && !ch.after.IsZero() {
			rm.DefaultBranch = branch
			if err := g.setHead(branch); err != nil {
				return err
			}
		}
		ch := ch
		s.queueEvent("push", func() map[string]any { return s.pushPayloadLocked(rm, g, ch, actor) })
		for _, n := range slices.Sorted(maps.Keys(rm.Issues)) {
			is := rm.Issues[n]
			pr := is.Pull
			if pr == nil || is.State != "open" {
				continue
			}
			switch {
			case pr.Head == branch && ch.after.IsZero():
				is.State, is.ClosedAt, is.UpdatedAt = "closed", now, now
				s.queuePullEvent(rm, is, "closed", actor)
			case pr.Head == branch:
				before := pr.HeadSHA
				pr.HeadSHA, is.UpdatedAt = ch.after.String(), now
				s.queuePullEventChange(rm, is, "synchronize", actor, pullChange{before: before, after: pr.HeadSHA})
			}
			if pr.Base == branch && !ch.after.IsZero() && is.State == "open" && g.isAncestor(plumbing.NewHash(pr.HeadSHA), ch.after) {
				is.State, is.ClosedAt, is.UpdatedAt = "closed", now, now
				pr.Merged, pr.MergedAt, pr.MergedBy, pr.MergeCommitSHA = true, now, actor, ch.after.String()
				pr.BaseSHA = ch.after.String()
				s.queuePullEvent(rm, is, "closed", actor)
			}
		}
	}
	return nil
}

func (s *Server) queuePullEvent(rm *repoMeta, is *issue, action, actor string) {
	s.queuePullEventChange(rm, is, action, actor, pullChange{})
}

// queuePullEventChange queues a pull_request event with what changed (edited, synchronize).
func (s *Server) queuePullEventChange(rm *repoMeta, is *issue, action, actor string, ch pullChange) {
	s.queueEvent("pull_request", func() map[string]any { return s.pullRequestPayloadLocked(rm, is, action, actor, ch) })
}

func labelID(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.ToLower(name)))
	return int64(h.Sum64() >> 2)
}

func (s *Server) labelsJSON(rm *repoMeta, names []string) []*github.Label {
	out := []*github.Label{}
	for _, n := range names {
		out = append(out, &github.Label{
			ID: github.Int64(labelID(n)), NodeID: github.String(nodeID("Label", labelID(n))),
			Name: github.String(n), Color: github.String("ededed"), Default: github.Bool(false), Description: github.String(""),
			URL: github.String(s.repoAPI(rm) + "/labels/" + n),
		})
	}
	return out
}

func (s *Server) pullJSON(rm *repoMeta, is *issue) *github.PullRequest {
	pr := is.Pull
	api := s.repoAPI(rm)
	repo := s.repoJSON(rm)
	headSHA, baseSHA := pr.HeadSHA, pr.BaseSHA
	if is.State == "open" {
		if g, err := s.openRepoGit(rm); err == nil {
			if h, ok := g.branch(pr.Base); ok {
				baseSHA = h.String()
			}
		}
	}
	ts := func(t time.Time) *github.Timestamp {
		if t.IsZero() {
			return nil
		}
		return &github.Timestamp{Time: t}
	}
	out := &github.PullRequest{
		ID:        github.Int64(is.ID),
		NodeID:    github.String(nodeID("PullRequest", is.ID)),
		Number:    github.Int(is.Number),
		State:     github.String(is.State),
		Title:     github.String(is.Title),
		Body:      github.String(is.Body),
		User:      s.userJSON(is.User),
		Labels:    s.labelsJSON(rm, is.Labels),
		Draft:     github.Bool(pr.Draft),
		Merged:    github.Bool(pr.Merged),
		Mergeable: github.Bool(is.State == "open"),
		Head: &github.PullRequestBranch{Label: github.String(rm.Owner + ":" + pr.Head), Ref: github.String(pr.Head),
			SHA: github.String(headSHA), Repo: repo, User: s.userJSON(rm.Owner)},
		Base: &github.PullRequestBranch{Label: github.String(rm.Owner + ":" + pr.Base), Ref: github.String(pr.Base),
			SHA: github.String(baseSHA), Repo: repo, User: s.userJSON(rm.Owner)},
		CreatedAt:   ts(is.CreatedAt),
		UpdatedAt:   ts(is.UpdatedAt),
		ClosedAt:    ts(is.ClosedAt),
		MergedAt:    ts(pr.MergedAt),
		URL:         github.String(fmt.Sprintf("%s/pulls/%d", api, is.Number)),
		HTMLURL:     github.String(fmt.Sprintf("%s/%s/pull/%d", s.URL, rm.fullName(), is.Number)),
		IssueURL:    github.String(fmt.Sprintf("%s/issues/%d", api, is.Number)),
		CommentsURL: github.String(fmt.Sprintf("%s/issues/%d/comments", api, is.Number)),
	}
	if is.State == "open" {
		out.MergeableState = github.String(strings.ToLower(s.mergeStateLocked(rm, is)))
	}
	if pr.MergeCommitSHA != "" {
		out.MergeCommitSHA = github.String(pr.MergeCommitSHA)
	}
	if pr.MergedBy != "" {
		out.MergedBy = s.userJSON(pr.MergedBy)
	}
	if pr.AutoMerge {
		method := pr.AutoMergeMethod
		if method == "" {
			method = "merge"
		}
		// GitHub fills the merge commit's title and message it will use when none was given:
		// the pull request's title and number, and its body.
		by := pr.AutoMergeBy
		if by == "" {
			by = is.User
		}
		out.AutoMerge = &github.PullRequestAutoMerge{MergeMethod: github.String(method), EnabledBy: s.userJSON(by),
			CommitTitle: github.String(fmt.Sprintf("%s (#%d)", is.Title, is.Number)), CommitMessage: github.String(is.Body)}
	}
	return out
}

// pullFromReq finds the pull request {number} of the request's repository.
func (s *Server) pullFromReq(r *http.Request) (*repoMeta, *issue, error) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		return nil, nil, err
	}
	n, _ := strconv.Atoi(r.PathValue("number"))
	is := rm.Issues[n]
	if is == nil || is.Pull == nil {
		return nil, nil, errNotFound
	}
	return rm, is, nil
}

func (s *Server) handleListPulls(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	head := q.Get("head")
	var out []map[string]any
	for _, n := range slices.Sorted(maps.Keys(rm.Issues)) {
		is := rm.Issues[n]
		if is.Pull == nil || (state != "all" && is.State != state) {
			continue
		}
		if head != "" {
			owner, branch, ok := strings.Cut(head, ":")
			if !ok || !strings.EqualFold(owner, rm.Owner) || branch != is.Pull.Head {
				continue
			}
		}
		if b := q.Get("base"); b != "" && b != is.Pull.Base {
			continue
		}
		out = append(out, s.fullPullJSON(rm, is))
	}
	if q.Get("direction") != "asc" {
		slices.Reverse(out)
	}
	writePage(w, r, out)
}

func (s *Server) handleGetPull(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.pullFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullPullJSON(rm, is))
}

// newIssueLocked allocates the next issue/pull request number.
func (s *Server) newIssueLocked(rm *repoMeta, title, body, user string) *issue {
	now := s.clock.Now()
	if rm.NextNumber == 0 {
		rm.NextNumber = 1
	}
	is := &issue{Number: rm.NextNumber, ID: s.st.nextID(), Title: title, Body: body, User: user,
		State: "open", Labels: []string{}, CreatedAt: now, UpdatedAt: now}
	rm.NextNumber++
	rm.Issues[is.Number] = is
	return is
}

func (s *Server) handleCreatePull(w http.ResponseWriter, r *http.Request) {
	rm, err := s.writableRepo(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Title string `json:"title"`
		Body  string `json:"body"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Draft bool   `json:"draft"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	head := req.Head
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		if !strings.EqualFold(owner, rm.Owner) {
			writeErr(w, validationFailed("PullRequest", "head", "invalid"))
			return
		}
		head = branch
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		writeErr(w, err)
		return
	}
	headSHA, ok := g.branch(head)
	if !ok {
		writeErr(w, validationFailed("PullRequest", "head", "invalid"))
		return
	}
	baseSHA, ok := g.branch(req.Base)
	if !ok {
		writeErr(w, validationFailed("PullRequest", "base", "invalid"))
		return
	}
	if req.Title == "" {
		writeErr(w, validationFailed("PullRequest", "title", "missing_field"))
		return
	}
	if herr := pullBodyError(req.Body); herr != nil {
		writeErr(w, herr)
		return
	}
	for _, is := range rm.Issues {
		if is.Pull != nil && is.State == "open" && is.Pull.Head == head && is.Pull.Base == req.Base {
			writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
				errors: []fieldError{{Resource: "PullRequest", Code: "custom",
					Message: fmt.Sprintf("A pull request already exists for %s:%s.", rm.Owner, head)}}})
			return
		}
	}
	if g.isAncestor(headSHA, baseSHA) {
		writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
			errors: []fieldError{{Resource: "PullRequest", Code: "custom",
				Message: fmt.Sprintf("No commits between %s and %s", req.Base, head)}}})
		return
	}
	p := principalOf(r)
	is := s.newIssueLocked(rm, req.Title, req.Body, p.login)
	is.Pull = &pull{Head: head, Base: req.Base, HeadSHA: headSHA.String(), BaseSHA: baseSHA.String(), Draft: req.Draft}
	s.queuePullEvent(rm, is, "opened", p.login)
	writeJSON(w, http.StatusCreated, s.fullPullJSON(rm, is))
}

func (s *Server) handleEditPull(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.pullFromReq(r)
	if err == nil && rm.Archived {
		err = errArchived
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Body != nil {
		if herr := pullBodyError(*req.Body); herr != nil {
			writeErr(w, herr)
			return
		}
	}
	now := s.clock.Now()
	actor := principalOf(r).login
	var change pullChange
	if req.Title != nil && *req.Title != is.Title {
		old := is.Title
		change.title = &old
	}
	if req.Body != nil && *req.Body != is.Body {
		old := is.Body
		change.body = &old
	}
	if req.Base != nil && *req.Base != is.Pull.Base {
		change.baseChanged, change.baseRef, change.baseSHA = true, is.Pull.Base, is.Pull.BaseSHA
	}
	if req.Title != nil {
		is.Title = *req.Title
	}
	if req.Body != nil {
		is.Body = *req.Body
	}
	if req.Base != nil {
		is.Pull.Base = *req.Base
	}
	if req.State != nil && *req.State != is.State {
		switch *req.State {
		case "closed":
			is.State, is.ClosedAt = "closed", now
			s.queuePullEvent(rm, is, "closed", actor)
		case "open":
			g, err := s.openRepoGit(rm)
			if err != nil {
				writeErr(w, err)
				return
			}
			h, ok := g.branch(is.Pull.Head)
			if is.Pull.Merged || !ok {
				writeErr(w, validationFailed("PullRequest", "state", "invalid"))
				return
			}
			is.State, is.ClosedAt, is.Pull.HeadSHA = "open", time.Time{}, h.String()
			s.queuePullEvent(rm, is, "reopened", actor)
		default:
			writeErr(w, validationFailed("PullRequest", "state", "invalid"))
			return
		}
	} else if change.title != nil || change.body != nil || change.baseChanged {
		s.queuePullEventChange(rm, is, "edited", actor, change)
	}
	is.UpdatedAt = now
	writeJSON(w, http.StatusOK, s.fullPullJSON(rm, is))
}

func (s *Server) handleMergePull(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.pullFromReq(r)
	if err == nil && rm.Archived {
		err = errArchived
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if is.State != "open" {
		writeErr(w, errorf(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
		return
	}
	if req.SHA != "" && req.SHA != is.Pull.HeadSHA {
		writeErr(w, errorf(http.StatusConflict, "Head branch was modified. Review and try the merge again."))
		return
	}
	if he := s.mergeRefusalLocked(rm, is, req.MergeMethod, principalOf(r)); he != nil {
		writeMergeRefusal(w, he)
		return
	}
	actor := principalOf(r).login
	h, err := s.mergePullLocked(rm, is, req.MergeMethod, req.CommitTitle, req.CommitMessage, actor)
	if errors.Is(err, errConflict) {
		writeErr(w, errorf(http.StatusMethodNotAllowed, "Pull Request is not mergeable"))
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &github.PullRequestMergeResult{SHA: github.String(h.String()),
		Merged: github.Bool(true), Message: github.String("Pull Request successfully merged")})
}

// mergePullLocked merges a pull request into its base: a merge commit (default), or one
// squashed commit for "squash" and "rebase".
func (s *Server) mergePullLocked(rm *repoMeta, is *issue, method, title, message, actor string) (plumbing.Hash, error) {
	g, err := s.openRepoGit(rm)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	pr := is.Pull
	base, ok := g.branch(pr.Base)
	if !ok {
		return plumbing.ZeroHash, errorf(http.StatusUnprocessableEntity, "Base branch %s does not exist", pr.Base)
	}
	head := plumbing.NewHash(pr.HeadSHA)
	mb, err := g.mergeBase(base, head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	bc, err := g.commit(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	hc, err := g.commit(head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tree := hc.TreeHash
	if mb != base {
		var mbTree plumbing.Hash
		if !mb.IsZero() {
			mc, err := g.commit(mb)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			mbTree = mc.TreeHash
		}
		if tree, err = g.mergeTrees(mbTree, bc.TreeHash, hc.TreeHash); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	parents := []plumbing.Hash{base, head}
	if title == "" {
		title = fmt.Sprintf("Merge pull request #%d from %s/%s", is.Number, rm.Owner, pr.Head)
		if message == "" {
			message = is.Title
		}
	}
	if method == "squash" || method == "rebase" {
		parents = []plumbing.Hash{base}
		if title == "" || strings.HasPrefix(title, "Merge pull request") {
			title = fmt.Sprintf("%s (#%d)", is.Title, is.Number)
		}
	}
	msg := title
	if message != "" {
		msg += "\n\n" + message
	}
	h, err := s.newMergeCommitLocked(rm, g, tree, parents, msg, actor)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	now := s.clock.Now()
	is.State, is.ClosedAt, is.UpdatedAt = "closed", now, now
	pr.Merged, pr.MergedAt, pr.MergedBy, pr.MergeCommitSHA, pr.BaseSHA = true, now, actor, h.String(), base.String()
	s.queuePullEvent(rm, is, "closed", actor)
	return h, s.moveRefLocked(rm, g, "refs/heads/"+pr.Base, h, actor, refHow{"merge", GuardServer})
}

// issueFromReq finds issue or pull request {number}.
func (s *Server) issueFromReq(r *http.Request) (*repoMeta, *issue, error) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		return nil, nil, err
	}
	n, _ := strconv.Atoi(r.PathValue("number"))
	is := rm.Issues[n]
	if is == nil {
		return nil, nil, errNotFound
	}
	return rm, is, nil
}

func (s *Server) issueJSON(rm *repoMeta, is *issue) *github.Issue {
	api := s.repoAPI(rm)
	out := &github.Issue{
		ID: github.Int64(is.ID), NodeID: github.String(nodeID("Issue", is.ID)), Number: github.Int(is.Number),
		State: github.String(is.State), Title: github.String(is.Title), Body: github.String(is.Body),
		User: s.userJSON(is.User), Labels: s.labelsJSON(rm, is.Labels),
		CreatedAt: &github.Timestamp{Time: is.CreatedAt}, UpdatedAt: &github.Timestamp{Time: is.UpdatedAt},
		URL:     github.String(fmt.Sprintf("%s/issues/%d", api, is.Number)),
		HTMLURL: github.String(fmt.Sprintf("%s/%s/issues/%d", s.URL, rm.fullName(), is.Number)),
	}
	if !is.ClosedAt.IsZero() {
		out.ClosedAt = &github.Timestamp{Time: is.ClosedAt}
	}
	if is.Pull != nil {
		out.PullRequestLinks = &github.PullRequestLinks{URL: github.String(fmt.Sprintf("%s/pulls/%d", api, is.Number))}
	}
	return out
}

func (s *Server) handleCreateIssue(w http.ResponseWriter, r *http.Request) {
	rm, err := s.writableRepo(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Title  string   `json:"title"`
		Body   string   `json:"body"`
		Labels []string `json:"labels"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Title == "" {
		writeErr(w, validationFailed("Issue", "title", "missing_field"))
		return
	}
	if herr := issueBodyError(req.Body); herr != nil {
		writeErr(w, herr)
		return
	}
	is := s.newIssueLocked(rm, req.Title, req.Body, principalOf(r).login)
	is.Labels = addLabels(is.Labels, req.Labels)
	writeJSON(w, http.StatusCreated, s.fullIssueJSON(rm, is))
}

func (s *Server) handleGetIssue(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.issueFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullIssueJSON(rm, is))
}

func (s *Server) commentJSON(rm *repoMeta, c *comment) *github.IssueComment {
	api := s.repoAPI(rm)
	return &github.IssueComment{
		ID: github.Int64(c.ID), NodeID: github.String(nodeID("IssueComment", c.ID)), Body: github.String(c.Body),
		User: s.userJSON(c.User), CreatedAt: &github.Timestamp{Time: c.CreatedAt}, UpdatedAt: &github.Timestamp{Time: c.UpdatedAt},
		URL:      github.String(fmt.Sprintf("%s/issues/comments/%d", api, c.ID)),
		HTMLURL:  github.String(fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", s.URL, rm.fullName(), c.Number, c.ID)),
		IssueURL: github.String(fmt.Sprintf("%s/issues/%d", api, c.Number)),
	}
}

func (s *Server) handleListComments(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.issueFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []*github.IssueComment{}
	for _, c := range rm.Comments {
		if c.Number == is.Number {
			out = append(out, s.commentJSON(rm, c))
		}
	}
	writePage(w, r, out)
}

func (s *Server) handleCreateComment(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.issueFromReq(r)
	if err == nil && rm.Archived {
		err = errArchived
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Body == "" {
		writeErr(w, validationFailed("IssueComment", "body", "missing_field"))
		return
	}
	if herr := commentBodyError(req.Body); herr != nil {
		writeErr(w, herr)
		return
	}
	now := s.clock.Now()
	c := &comment{ID: s.st.nextID(), Number: is.Number, Body: req.Body, User: principalOf(r).login, CreatedAt: now, UpdatedAt: now}
	rm.Comments = append(rm.Comments, c)
	writeJSON(w, http.StatusCreated, s.commentJSON(rm, c))
}

func (s *Server) commentFromReq(r *http.Request) (*repoMeta, *comment, error) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		return nil, nil, err
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	for _, c := range rm.Comments {
		if c.ID == id {
			return rm, c, nil
		}
	}
	return nil, nil, errNotFound
}

func (s *Server) handleComment(w http.ResponseWriter, r *http.Request) {
	rm, c, err := s.commentFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	switch r.Method {
	case http.MethodPatch:
		var req struct {
			Body string `json:"body"`
		}
		if err := decodeBody(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		if herr := commentBodyError(req.Body); herr != nil {
			writeErr(w, herr)
			return
		}
		c.Body, c.UpdatedAt = req.Body, s.clock.Now()
	case http.MethodDelete:
		rm.Comments = slices.DeleteFunc(rm.Comments, func(x *comment) bool { return x == c })
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, s.commentJSON(rm, c))
}

func addLabels(have, add []string) []string {
	for _, l := range add {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, l) }) {
			have = append(have, l)
		}
	}
	return have
}

// handleLabels serves GET/POST/PUT /issues/{number}/labels and DELETE .../labels/{name}.
func (s *Server) handleLabels(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.issueFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		data, err := readAll(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		var names []string
		if err := jsonUnmarshalLabels(data, &names); err != nil {
			writeErr(w, err)
			return
		}
		if r.Method == http.MethodPut {
			is.Labels = []string{}
		}
		is.Labels = addLabels(is.Labels, names)
	case http.MethodDelete:
		name := r.PathValue("name")
		before := len(is.Labels)
		is.Labels = slices.DeleteFunc(is.Labels, func(l string) bool { return strings.EqualFold(l, name) })
		if len(is.Labels) == before {
			writeErr(w, errorf(http.StatusNotFound, "Label does not exist"))
			return
		}
	}
	if r.Method != http.MethodGet {
		is.UpdatedAt = s.clock.Now()
		writeJSON(w, http.StatusOK, s.labelsJSON(rm, is.Labels))
		return
	}
	writePage(w, r, s.labelsJSON(rm, is.Labels))
}
