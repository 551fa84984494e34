package local

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GitHandler serves the repos of the local forge rooted at root over git's
// smart HTTP protocol, read-only, so a Flux source-controller (or git
// clone) can fetch <owner>/<repo>.git from http://HOST/<owner>/<repo>.git
// or, as on GitHub, http://HOST/<owner>/<repo> (the URL fleetbot renders
// into Flux objects). It runs the git binary's http-backend as
// a CGI program for fetches only: a push is refused with 403, since target
// repos are written by fleetbot apply (and merged by hand) on the forge
// itself. It takes no forge lock: git reads stay consistent while apply
// moves refs.
func GitHandler(root string, log *slog.Logger) (http.Handler, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local forge %s: %w", root, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("local forge %s: not a directory (run fleetbot apply --forge local:%s first)", abs, root)
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("serving git over HTTP needs the git binary: %w", err)
	}
	return &gitHandler{root: abs, git: gitBin, log: log}, nil
}

type gitHandler struct {
	root string
	git  string
	log  *slog.Logger
}

func (h *gitHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	owner, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	repo, suffix, ok2 := strings.Cut(rest, ".git/")
	if !ok2 {
		repo, suffix, ok2 = strings.Cut(rest, "/")
	}
	if !ok || !ok2 || validName("owner", owner) != nil || validName("repo", repo) != nil {
		http.Error(w, "not a repository path: want /<owner>/<repo>.git/...", http.StatusNotFound)
		return
	}
	fetch := (r.Method == http.MethodGet && suffix == "info/refs" && r.URL.Query().Get("service") == "git-upload-pack") ||
		(r.Method == http.MethodPost && suffix == "git-upload-pack")
	if !fetch {
		// Pushes and the dumb protocol: fleetbot writes the forge, readers
		// use smart HTTP.
		http.Error(w, "read-only: this server only answers git fetches (smart HTTP upload-pack)", http.StatusForbidden)
		return
	}
	if st, err := os.Stat(filepath.Join(h.root, owner, repo+".git")); err != nil || !st.IsDir() {
		http.Error(w, "repository "+owner+"/"+repo+" not found in the local forge", http.StatusNotFound)
		return
	}
	cg := &cgi.Handler{
		Path: h.git,
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + h.root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + h.root,
		},
		InheritEnv: []string{"PATH"},
		Stderr:     logWriter{h.log.With("repo", owner+"/"+repo)},
	}
	h.log.Debug("git fetch", "repo", owner+"/"+repo, "path", suffix)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + owner + "/" + repo + ".git/" + suffix
	r2.URL.RawPath = ""
	cg.ServeHTTP(w, r2)
}

// logWriter forwards http-backend's stderr to the logger.
type logWriter struct{ log *slog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	if msg := strings.TrimSpace(string(p)); msg != "" {
		l.log.Warn("git http-backend", "stderr", msg)
	}
	return len(p), nil
}
