package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// gitData opens the request's repository for a Git Data API call: 409 when it is empty.
func (s *Server) gitData(r *http.Request, write bool) (*repoMeta, *gitRepo, error) {
	rm, err := s.repoFromReq(r)
	if err == nil && write {
		rm, err = s.writableRepo(r)
	}
	if err != nil {
		return nil, nil, err
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return nil, nil, err
	}
	if g.empty() {
		return nil, nil, errEmptyRepo
	}
	return rm, g, nil
}

func validationFailed(resource, field, code string) *httpError {
	return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
		errors: []fieldError{{Resource: resource, Field: field, Code: code}}}
}

func (s *Server) handleCreateBlob(w http.ResponseWriter, r *http.Request) {
	_, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Content  *string `json:"content"`
		Encoding string  `json:"encoding"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Content == nil {
		writeErr(w, validationFailed("Blob", "content", "missing_field"))
		return
	}
	data := []byte(*req.Content)
	switch req.Encoding {
	case "", "utf-8", "utf8":
	case "base64":
		if data, err = base64.StdEncoding.DecodeString(*req.Content); err != nil {
			writeErr(w, errorf(http.StatusUnprocessableEntity, "Invalid request.\n\ncontent is not valid Base64"))
			return
		}
	default:
		writeErr(w, validationFailed("Blob", "encoding", "invalid"))
		return
	}
	h, err := g.writeBlob(data)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"sha": h.String(), "url": s.repoAPI(s.mustRepo(r)) + "/git/blobs/" + h.String()})
}

func (s *Server) mustRepo(r *http.Request) *repoMeta {
	rm, _ := s.repoFromReq(r)
	return rm
}

func (s *Server) handleGetBlob(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	h := plumbing.NewHash(r.PathValue("sha"))
	if t, ok := g.objectType(h); !ok || t != plumbing.BlobObject || !isSHA(r.PathValue("sha")) {
		writeErr(w, errNotFound)
		return
	}
	data, err := g.blob(h)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &github.Blob{
		SHA: github.String(h.String()), NodeID: github.String(base64.StdEncoding.EncodeToString([]byte("Blob:" + h.String()))),
		Size: github.Int(len(data)), Encoding: github.String("base64"),
		Content: github.String(base64.StdEncoding.EncodeToString(data)),
		URL:     github.String(s.repoAPI(rm) + "/git/blobs/" + h.String()),
	})
}

func modeString(m filemode.FileMode) string {
	if m == filemode.Dir {
		return "040000"
	}
	return strings.TrimPrefix(m.String(), "0")
}

func typeOf(m filemode.FileMode) string {
	switch m {
	case filemode.Dir:
		return "tree"
	case filemode.Submodule:
		return "commit"
	}
	return "blob"
}

// treeJSON lists a tree, recursively when asked (sub-trees appear before their contents).
func (s *Server) treeJSON(rm *repoMeta, g *gitRepo, h plumbing.Hash, recursive bool) (*github.Tree, error) {
	api := s.repoAPI(rm)
	entries := []*github.TreeEntry{}
	var walk func(prefix string, h plumbing.Hash) error
	walk = func(prefix string, h plumbing.Hash) error {
		t, err := object.GetTree(g.st, h)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			p := path.Join(prefix, e.Name)
			te := &github.TreeEntry{
				Path: github.String(p), Mode: github.String(modeString(e.Mode)),
				Type: github.String(typeOf(e.Mode)), SHA: github.String(e.Hash.String()),
			}
			switch e.Mode {
			case filemode.Dir:
				te.URL = github.String(api + "/git/trees/" + e.Hash.String())
			case filemode.Submodule:
			default:
				if size, err := g.st.EncodedObjectSize(e.Hash); err == nil {
					te.Size = github.Int(int(size))
				}
				te.URL = github.String(api + "/git/blobs/" + e.Hash.String())
			}
			entries = append(entries, te)
			if recursive && e.Mode == filemode.Dir {
				if err := walk(p, e.Hash); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", h); err != nil {
		return nil, err
	}
	return &github.Tree{SHA: github.String(h.String()), Entries: entries, Truncated: github.Bool(false)}, nil
}

func (s *Server) handleGetTree(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	rev := r.PathValue("sha")
	var h plumbing.Hash
	if isSHA(rev) {
		switch t, _ := g.objectType(plumbing.NewHash(rev)); t {
		case plumbing.TreeObject:
			h = plumbing.NewHash(rev)
		case plumbing.CommitObject, plumbing.TagObject:
			c, err := g.peel(plumbing.NewHash(rev))
			if err != nil {
				writeErr(w, errNotFound)
				return
			}
			h = c.TreeHash
		}
	} else if c, err := g.resolveCommit(rev); err == nil {
		h = c.TreeHash
	}
	if h.IsZero() {
		writeErr(w, errNotFound)
		return
	}
	recursive := r.URL.Query().Get("recursive")
	t, err := s.treeJSON(rm, g, h, recursive != "" && recursive != "0" && recursive != "false")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sha": t.SHA, "url": s.repoAPI(rm) + "/git/trees/" + h.String(),
		"tree": t.Entries, "truncated": false})
}

type treeEntryRequest struct {
	Path    string          `json:"path"`
	Mode    string          `json:"mode"`
	Type    string          `json:"type"`
	SHA     json.RawMessage `json:"sha"`
	Content *string         `json:"content"`
}

func (s *Server) handleCreateTree(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		BaseTree string             `json:"base_tree"`
		Tree     []treeEntryRequest `json:"tree"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	flat := map[string]flatEntry{}
	if req.BaseTree != "" {
		base := plumbing.NewHash(req.BaseTree)
		if t, ok := g.objectType(base); !ok || t != plumbing.TreeObject || !isSHA(req.BaseTree) {
			writeErr(w, validationFailed("Tree", "base_tree", "invalid"))
			return
		}
		if flat, err = g.flatten(base); err != nil {
			writeErr(w, err)
			return
		}
	}
	for _, e := range req.Tree {
		p := strings.Trim(e.Path, "/")
		if p == "" || strings.Contains(p, "//") {
			writeErr(w, errorf(http.StatusUnprocessableEntity, "tree.path contains a malformed path component"))
			return
		}
		mode, err := filemode.New(e.Mode)
		if err != nil || e.Mode == "" {
			writeErr(w, errorf(http.StatusUnprocessableEntity, "Must supply a valid tree.mode"))
			return
		}
		var sha *string
		if len(e.SHA) > 0 && string(e.SHA) != "null" {
			var v string
			if err := json.Unmarshal(e.SHA, &v); err != nil {
				writeErr(w, errBadRequest)
				return
			}
			sha = &v
		}
		switch {
		case e.Content != nil:
			h, err := g.writeBlob([]byte(*e.Content))
			if err != nil {
				writeErr(w, err)
				return
			}
			removePrefix(flat, p)
			flat[p] = flatEntry{mode: mode, hash: h}
		case sha != nil:
			h := plumbing.NewHash(*sha)
			t, ok := g.objectType(h)
			if !isSHA(*sha) || (!ok && mode != filemode.Submodule) {
				writeErr(w, errorf(http.StatusUnprocessableEntity, "tree.sha %s is not a valid blob", *sha))
				return
			}
			removePrefix(flat, p)
			if mode == filemode.Dir || t == plumbing.TreeObject {
				sub, err := g.flatten(h)
				if err != nil {
					writeErr(w, err)
					return
				}
				for sp, se := range sub {
					flat[p+"/"+sp] = se
				}
				continue
			}
			flat[p] = flatEntry{mode: mode, hash: h}
		case len(e.SHA) > 0: // "sha": null deletes the path (a file or a whole directory)
			removePrefix(flat, p)
			delete(flat, p)
		default:
			writeErr(w, errorf(http.StatusUnprocessableEntity, "Must supply either tree.sha or tree.content"))
			return
		}
	}
	// A file replacing a directory or the other way round must not leave both.
	paths := slices.Sorted(maps.Keys(flat))
	sort.Strings(paths)
	for i := 1; i < len(paths); i++ {
		if strings.HasPrefix(paths[i], paths[i-1]+"/") {
			delete(flat, paths[i-1])
		}
	}
	h, err := g.buildTree(flat)
	if err != nil {
		writeErr(w, err)
		return
	}
	t, err := s.treeJSON(rm, g, h, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"sha": t.SHA, "url": s.repoAPI(rm) + "/git/trees/" + h.String(),
		"tree": t.Entries, "truncated": false})
}

// removePrefix deletes every path below dir.
func removePrefix(flat map[string]flatEntry, dir string) {
	for p := range flat {
		if strings.HasPrefix(p, dir+"/") {
			delete(flat, p)
		}
	}
}

func (s *Server) handleCreateCommit(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Message   *string           `json:"message"`
		Tree      string            `json:"tree"`
		Parents   []string          `json:"parents"`
		Author    *signatureRequest `json:"author"`
		Committer *signatureRequest `json:"committer"`
		Signature string            `json:"signature"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Message == nil {
		writeErr(w, validationFailed("Commit", "message", "missing_field"))
		return
	}
	tree := plumbing.NewHash(req.Tree)
	if t, ok := g.objectType(tree); !ok || t != plumbing.TreeObject || !isSHA(req.Tree) {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Tree SHA does not exist"))
		return
	}
	var parents []plumbing.Hash
	for _, p := range req.Parents {
		h := plumbing.NewHash(p)
		if t, ok := g.objectType(h); !ok || t != plumbing.CommitObject || !isSHA(p) {
			writeErr(w, errorf(http.StatusUnprocessableEntity, "Parent SHA does not exist or is not a commit object"))
			return
		}
		parents = append(parents, h)
	}
	now := s.clock.Now()
	h, err := s.newCommitLocked(rm, g, tree, parents, *req.Message, req.Author.signature(now), req.Committer.signature(now), principalOf(r).login)
	if err != nil {
		writeErr(w, err)
		return
	}
	c, err := g.commit(h)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.fullGitCommitJSON(rm, c))
}

func (s *Server) handleGetCommit(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	sha := r.PathValue("sha")
	if t, ok := g.objectType(plumbing.NewHash(sha)); !ok || t != plumbing.CommitObject || !isSHA(sha) {
		writeErr(w, errNotFound)
		return
	}
	c, err := g.commit(plumbing.NewHash(sha))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullGitCommitJSON(rm, c))
}

// handleRepoCommit serves GET /repos/{owner}/{repo}/commits/{ref} (the repos API view).
func (s *Server) handleRepoCommit(w http.ResponseWriter, r *http.Request) {
	rm, c, err := s.refCommit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.repoCommitJSON(rm, c))
}

func (s *Server) handleGetRef(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	name := "refs/" + r.PathValue("ref")
	h, ok := g.ref(name)
	if !ok {
		writeErr(w, errNotFound)
		return
	}
	t, _ := g.objectType(h)
	writeJSON(w, http.StatusOK, s.refJSON(rm, name, h, t.String()))
}

func (s *Server) handleMatchingRefs(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	prefix := "refs/" + r.PathValue("ref")
	refs, err := g.refs()
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []*github.Reference{}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		if strings.HasPrefix(name, prefix) {
			t, _ := g.objectType(refs[name])
			out = append(out, s.refJSON(rm, name, refs[name], t.String()))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func validRefName(name string) bool {
	if !strings.HasPrefix(name, "refs/") || strings.Count(name, "/") < 2 || strings.HasSuffix(name, "/") {
		return false
	}
	return !strings.ContainsAny(name, " ~^:?*[\\") && !strings.Contains(name, "..") && !strings.Contains(name, "//") &&
		!strings.HasSuffix(name, ".lock") && !strings.Contains(name, "@{")
}

func (s *Server) handleCreateRef(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if !validRefName(req.Ref) {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Reference name is invalid"))
		return
	}
	h := plumbing.NewHash(req.SHA)
	if _, ok := g.objectType(h); !ok || !isSHA(req.SHA) {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Object does not exist"))
		return
	}
	if _, exists := g.ref(req.Ref); exists {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Reference already exists"))
		return
	}
	// GitHub refuses to create a ref that exists: the creation names "absent" as the old head.
	if err := s.moveRefLocked(rm, g, req.Ref, h, principalOf(r).login, refHow{"rest", GuardExpected}); err != nil {
		writeErr(w, err)
		return
	}
	t, _ := g.objectType(h)
	writeJSON(w, http.StatusCreated, s.refJSON(rm, req.Ref, h, t.String()))
}

func (s *Server) handleUpdateRef(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	name := "refs/" + r.PathValue("ref")
	old, exists := g.ref(name)
	if !exists {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Reference does not exist"))
		return
	}
	h := plumbing.NewHash(req.SHA)
	if t, ok := g.objectType(h); !ok || !isSHA(req.SHA) || (strings.HasPrefix(name, "refs/heads/") && t != plumbing.CommitObject) {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Object does not exist"))
		return
	}
	if !req.Force && !g.isAncestor(old, h) {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Update is not a fast forward"))
		return
	}
	how := refHow{"rest", GuardFastForward}
	if req.Force {
		how.guard = GuardNone
	}
	if err := s.moveRefLocked(rm, g, name, h, principalOf(r).login, how); err != nil {
		writeErr(w, err)
		return
	}
	t, _ := g.objectType(h)
	writeJSON(w, http.StatusOK, s.refJSON(rm, name, h, t.String()))
}

func (s *Server) handleDeleteRef(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	name := "refs/" + r.PathValue("ref")
	if _, exists := g.ref(name); !exists {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "Reference does not exist"))
		return
	}
	if err := s.moveRefLocked(rm, g, name, plumbing.ZeroHash, principalOf(r).login, refHow{"rest", GuardNone}); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// refCommit resolves the {ref} of a read request on a repo's git data to a
// commit, answering 422 as GitHub does when there is none.
func (s *Server) refCommit(r *http.Request) (*repoMeta, *object.Commit, error) {
	rm, g, err := s.gitData(r, false)
	if err != nil {
		return nil, nil, err
	}
	c, err := g.resolveCommit(r.PathValue("ref"))
	if err != nil {
		return nil, nil, errorf(http.StatusUnprocessableEntity, "No commit found for SHA: %s", r.PathValue("ref"))
	}
	return rm, c, nil
}
