package githubtest

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// handleGit serves git smart HTTP (info/refs, git-upload-pack, git-receive-pack) for
// /{owner}/{repo}.git through the git binary's http-backend CGI, under the server lock so REST
// calls and pushes see one state. Ref changes made by a push are then applied like REST ones:
// pull requests become merged or synchronized and webhooks fire.
func (s *Server) handleGit(w http.ResponseWriter, r *http.Request) {
	owner := r.PathValue("owner")
	name := strings.TrimSuffix(r.PathValue("repo"), ".git")
	p := principalOf(r)
	push := strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack"

	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, name)]
	if rm == nil {
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return
	}
	if push && p.kind == "anonymous" {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Authentication required.", http.StatusUnauthorized)
		return
	}
	if push && rm.Archived {
		http.Error(w, "This repository was archived so it is read-only.", http.StatusForbidden)
		return
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, "fake github: git binary not found", http.StatusInternalServerError)
		return
	}
	dir := s.gitDir(rm)
	g, err := s.openRepoGit(rm)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	before, err := g.refs()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	rel, _ := filepath.Rel(filepath.Join(s.dir, "repos"), dir)
	_, suffix, _ := strings.Cut(r.URL.Path, ".git")
	if !strings.HasSuffix(r.PathValue("repo"), ".git") {
		suffix = strings.TrimPrefix(r.URL.Path, "/"+owner+"/"+r.PathValue("repo"))
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + filepath.ToSlash(rel) + suffix
	user := p.login
	if user == "" {
		user = "anonymous"
	}
	h := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Join(s.dir, "repos"),
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + user,
			"HOME=" + s.dir,
			"GIT_CONFIG_NOSYSTEM=1",
		},
		InheritEnv: []string{"PATH"},
		Stderr:     &slogWriter{log: s.cfg.logger.With("repo", rm.fullName())},
	}
	h.ServeHTTP(w, r2)
	// git may have written objects, references and packs the open storage does not know.
	delete(s.gits, dir)
	if !push || r.Method != http.MethodPost {
		return
	}

	g, err = s.openRepoGit(rm) // the one copy later requests use too
	if err != nil {
		s.cfg.logger.Error("reopening repository after push", "repo", rm.fullName(), "err", err)
		return
	}
	after, err := g.refs()
	if err != nil {
		s.cfg.logger.Error("listing refs after push", "repo", rm.fullName(), "err", err)
		return
	}
	var changes []refChange
	for name, h := range after {
		if before[name] != h {
			// A push's command names the ref's old value, which receive-pack checks under the
			// ref's lock.
			changes = append(changes, refChange{name: name, before: before[name], after: h, how: refHow{"git", GuardExpected}})
		}
	}
	for name, h := range before {
		if _, ok := after[name]; !ok {
			changes = append(changes, refChange{name: name, before: h, after: plumbing.ZeroHash, how: refHow{"git", GuardExpected}})
		}
	}
	if err := s.refsChangedLocked(rm, g, changes, user); err != nil {
		s.cfg.logger.Error("applying pushed refs", "repo", rm.fullName(), "err", err)
	}
}

// refChange is one reference moved by a push or a REST call (zero hash: absent).
type refChange struct {
	name          string // full name, refs/heads/x
	before, after plumbing.Hash
	how           refHow
}

func (s *Server) gitDir(rm *repoMeta) string {
	return filepath.Join(s.dir, "repos", rm.Owner, rm.Name+".git")
}

// openRepoGit returns a repository's git storage, opened once and kept until git
// http-backend runs on it (see handleGit). Callers hold s.mu.
func (s *Server) openRepoGit(rm *repoMeta) (*gitRepo, error) {
	dir := s.gitDir(rm)
	if g := s.gits[dir]; g != nil {
		return g, nil
	}
	g, err := openGit(dir, s.loose)
	if err != nil {
		return nil, fmt.Errorf("fake github: %w", err)
	}
	if s.gits == nil {
		s.gits = map[string]*gitRepo{}
	}
	s.gits[dir] = g
	return g, nil
}

// slogWriter forwards the git backend's stderr to the logger.
type slogWriter struct{ log *slog.Logger }

func (l *slogWriter) Write(p []byte) (int, error) {
	if msg := strings.TrimSpace(string(p)); msg != "" {
		l.log.Warn("git http-backend", "stderr", msg)
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)
