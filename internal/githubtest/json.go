package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// nodeID makes a GraphQL-style global id.
func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "0%02d:%s%d", len(kind), kind, id))
}

// paginate cuts items to the page asked for by per_page/page and builds GitHub's Link header.
func paginate[T any](r *http.Request, items []T) ([]T, string) {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 {
		per = DefaultPerPage
	}
	per = min(per, MaxPerPage)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	last := max(1, (len(items)+per-1)/per)
	start := min((page-1)*per, len(items))
	end := min(start+per, len(items))
	out := items[start:end]
	if out == nil {
		out = []T{}
	}
	link := func(p int, rel string) string {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		q2.Set("page", strconv.Itoa(p))
		q2.Set("per_page", strconv.Itoa(per))
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		return fmt.Sprintf(`<%s://%s%s?%s>; rel="%s"`, scheme, r.Host, r.URL.EscapedPath(), q2.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	return out, strings.Join(links, ", ")
}

// writePage writes one page of a list with its Link header.
func writePage[T any](w http.ResponseWriter, r *http.Request, items []T) {
	page, link := paginate(r, items)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) userJSON(login string) *github.User {
	a := s.st.Accounts[strings.ToLower(login)]
	if a == nil {
		return &github.User{Login: github.String(login), Type: github.String("User")}
	}
	// Every property of GitHub's simple-user, with the URL templates GitHub documents.
	api := s.APIURL() + "users/" + url.PathEscape(a.Login)
	return &github.User{
		Login:             github.String(a.Login),
		ID:                github.Int64(a.ID),
		NodeID:            github.String(nodeID(a.Type, a.ID)),
		Type:              github.String(a.Type),
		SiteAdmin:         github.Bool(false),
		URL:               github.String(api),
		HTMLURL:           github.String(s.URL + "/" + url.PathEscape(a.Login)),
		AvatarURL:         github.String(fmt.Sprintf("%s/avatars/u/%d?v=4", s.URL, a.ID)),
		GravatarID:        github.String(""),
		FollowersURL:      github.String(api + "/followers"),
		FollowingURL:      github.String(api + "/following{/other_user}"),
		GistsURL:          github.String(api + "/gists{/gist_id}"),
		StarredURL:        github.String(api + "/starred{/owner}{/repo}"),
		SubscriptionsURL:  github.String(api + "/subscriptions"),
		OrganizationsURL:  github.String(api + "/orgs"),
		ReposURL:          github.String(api + "/repos"),
		EventsURL:         github.String(api + "/events{/privacy}"),
		ReceivedEventsURL: github.String(api + "/received_events"),
	}
}

// noreplyEmail is the address GitHub gives an account's commits.
func (s *Server) noreplyEmail(login string) string {
	var id int64
	if a := s.st.Accounts[strings.ToLower(login)]; a != nil {
		id = a.ID
	}
	return fmt.Sprintf("%d+%s@users.noreply.github.com", id, login)
}

var noreplyRe = regexp.MustCompile(`^(?:\d+\+)?([^@]+)@users\.noreply\.github\.com$`)

// loginForEmail maps a commit email to an account, as GitHub links commits to users.
func (s *Server) loginForEmail(email string) (string, bool) {
	m := noreplyRe.FindStringSubmatch(strings.ToLower(email))
	if m == nil {
		return "", false
	}
	a := s.st.Accounts[m[1]]
	if a == nil {
		return "", false
	}
	return a.Login, true
}

func (s *Server) repoAPI(rm *repoMeta) string {
	return s.APIURL() + "repos/" + url.PathEscape(rm.Owner) + "/" + url.PathEscape(rm.Name)
}

func (s *Server) repoJSON(rm *repoMeta) *github.Repository {
	api := s.repoAPI(rm)
	size := s.repoSizeLocked(rm)
	topics := rm.Topics
	if topics == nil {
		topics = []string{}
	}
	out := &github.Repository{
		ID:             github.Int64(rm.ID),
		NodeID:         github.String(nodeID("Repository", rm.ID)),
		Name:           github.String(rm.Name),
		FullName:       github.String(rm.fullName()),
		Owner:          s.userJSON(rm.Owner),
		Private:        github.Bool(rm.Visibility != "public"),
		Visibility:     github.String(rm.Visibility),
		Description:    github.String(rm.Description),
		DefaultBranch:  github.String(rm.DefaultBranch),
		Archived:       github.Bool(rm.Archived),
		Disabled:       github.Bool(false),
		Fork:           github.Bool(false),
		Topics:         topics,
		Size:           github.Int(size),
		HasIssues:      github.Bool(true),
		URL:            github.String(api),
		HTMLURL:        github.String(s.URL + "/" + rm.fullName()),
		CloneURL:       github.String(s.URL + "/" + rm.fullName() + ".git"),
		GitURL:         github.String(s.URL + "/" + rm.fullName() + ".git"),
		CreatedAt:      &github.Timestamp{Time: rm.CreatedAt},
		UpdatedAt:      &github.Timestamp{Time: rm.UpdatedAt},
		PushedAt:       &github.Timestamp{Time: rm.PushedAt},
		Permissions:    map[string]bool{"admin": true, "maintain": true, "push": true, "triage": true, "pull": true},
		AllowAutoMerge: github.Bool(rm.AllowAutoMerge),
	}
	mergeSettingsJSON(rm, out)
	return out
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// gitCommitJSON is a commit as the Git Data API shows it.
func (s *Server) gitCommitJSON(rm *repoMeta, c *object.Commit) *github.Commit {
	api := s.repoAPI(rm)
	var parents []*github.Commit
	for _, p := range c.ParentHashes {
		parents = append(parents, &github.Commit{
			SHA: github.String(p.String()), URL: github.String(api + "/git/commits/" + p.String()),
			HTMLURL: github.String(s.URL + "/" + rm.fullName() + "/commit/" + p.String()),
		})
	}
	if parents == nil {
		parents = []*github.Commit{}
	}
	sig := func(sg object.Signature) *github.CommitAuthor {
		return &github.CommitAuthor{Name: github.String(sg.Name), Email: github.String(sg.Email),
			Date: &github.Timestamp{Time: sg.When.UTC()}}
	}
	verified := rm.Verified[c.Hash.String()]
	reason := "unsigned"
	if verified {
		reason = "valid"
	}
	return &github.Commit{
		SHA:          github.String(c.Hash.String()),
		NodeID:       github.String(base64.StdEncoding.EncodeToString([]byte("Commit:" + c.Hash.String()))),
		Author:       sig(c.Author),
		Committer:    sig(c.Committer),
		Message:      github.String(c.Message),
		Tree:         &github.Tree{SHA: github.String(c.TreeHash.String())},
		Parents:      parents,
		URL:          github.String(api + "/git/commits/" + c.Hash.String()),
		HTMLURL:      github.String(s.URL + "/" + rm.fullName() + "/commit/" + c.Hash.String()),
		Verification: &github.SignatureVerification{Verified: github.Bool(verified), Reason: github.String(reason)},
	}
}

// repoCommitJSON is a commit as the repos API (branches, compare, commits) shows it.
func (s *Server) repoCommitJSON(rm *repoMeta, c *object.Commit) *github.RepositoryCommit {
	gc := s.gitCommitJSON(rm, c)
	rc := &github.RepositoryCommit{
		SHA:     gc.SHA,
		NodeID:  gc.NodeID,
		Commit:  gc,
		Parents: gc.Parents,
		URL:     github.String(s.repoAPI(rm) + "/commits/" + c.Hash.String()),
		HTMLURL: gc.HTMLURL,
	}
	gc.SHA, gc.Parents, gc.NodeID = nil, nil, nil
	if login, ok := s.loginForEmail(c.Author.Email); ok {
		rc.Author = s.userJSON(login)
	}
	if login, ok := s.loginForEmail(c.Committer.Email); ok {
		rc.Committer = s.userJSON(login)
	}
	return rc
}

func (s *Server) refJSON(rm *repoMeta, name string, h plumbing.Hash, typ string) *github.Reference {
	api := s.repoAPI(rm)
	return &github.Reference{
		Ref:    github.String(name),
		URL:    github.String(api + "/git/" + name),
		NodeID: github.String(base64.StdEncoding.EncodeToString([]byte("Ref:" + rm.fullName() + ":" + name))),
		Object: &github.GitObject{Type: github.String(typ), SHA: github.String(h.String()),
			URL: github.String(api + "/git/" + typ + "s/" + h.String())},
	}
}

// jsonUnmarshalLabels accepts both label bodies GitHub takes: ["a","b"] and {"labels":["a","b"]}.
func jsonUnmarshalLabels(data []byte, names *[]string) error {
	if err := json.Unmarshal(data, names); err == nil {
		return nil
	}
	var obj struct {
		Labels []string `json:"labels"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return errBadRequest
	}
	*names = obj.Labels
	return nil
}
