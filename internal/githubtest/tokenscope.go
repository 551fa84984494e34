package githubtest

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v62/github"
)

// An installation access token may be narrowed when it is created: "use the repositories or
// repository_ids body parameters to specify individual repositories that the installation
// access token can access ... The installation access token cannot be granted access to
// repositories that the installation was not granted access to. Up to 500 repositories can be
// listed"; "use the permissions body parameter to specify the permissions that the
// installation access token should have ... The installation access token cannot be granted
// permissions that the app was not granted." Asking for more is 422.
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app

// maxTokenRepositories is the most repositories one token may be narrowed to.
const maxTokenRepositories = 500

// tokenRequest is the body of POST /app/installations/{id}/access_tokens.
type tokenRequest struct {
	Repositories  []string          `json:"repositories"`
	RepositoryIDs []int64           `json:"repository_ids"`
	Permissions   map[string]string `json:"permissions"`
}

// errTokenRepositories and errTokenPermissions are GitHub's answers to a token asking for more
// than its installation holds.
var (
	errTokenRepositories = &httpError{status: http.StatusUnprocessableEntity,
		message: "There is at least one repository that does not exist or is not accessible to the parent installation."}
	errTokenPermissions = &httpError{status: http.StatusUnprocessableEntity,
		message: "The permissions requested are not granted to this installation."}
)

// scopeLocked checks a token request against installation in and returns the repositories
// (keys; nil: all of the installation's) and permissions (nil: all of the App's) of the token.
func (s *Server) scopeLocked(in *installation, req tokenRequest) ([]string, map[string]string, *httpError) {
	if len(req.Repositories)+len(req.RepositoryIDs) > maxTokenRepositories {
		return nil, nil, errorf(http.StatusUnprocessableEntity, "Too many repositories: at most %d may be listed.", maxTokenRepositories)
	}
	var repos []string
	add := func(rm *repoMeta) *httpError {
		if rm == nil || !strings.EqualFold(rm.Owner, in.Account) {
			return errTokenRepositories
		}
		if k := repoKey(rm.Owner, rm.Name); !slices.Contains(repos, k) {
			repos = append(repos, k)
		}
		return nil
	}
	for _, name := range req.Repositories {
		if herr := add(s.st.Repos[repoKey(in.Account, name)]); herr != nil {
			return nil, nil, herr
		}
	}
	for _, id := range req.RepositoryIDs {
		var found *repoMeta
		for _, rm := range s.st.Repos {
			if rm.ID == id {
				found = rm
			}
		}
		if herr := add(found); herr != nil {
			return nil, nil, herr
		}
	}
	if len(req.Permissions) == 0 {
		return repos, nil, nil
	}
	if s.cfg.appPerms != nil {
		for perm, level := range req.Permissions {
			if levelRank(level) == 0 || levelRank(s.cfg.appPerms[perm]) < levelRank(level) {
				return nil, nil, errTokenPermissions
			}
		}
	}
	return repos, maps.Clone(req.Permissions), nil
}

// decodeTokenRequest reads a token request; an empty body (or {}) asks for everything.
func decodeTokenRequest(r *http.Request) (tokenRequest, error) {
	var req tokenRequest
	data, err := readAll(r)
	if err != nil {
		return req, err
	}
	if len(strings.TrimSpace(string(data))) > 0 && json.Unmarshal(data, &req) != nil {
		return req, errBadRequest
	}
	return req, nil
}

// tokenPermissions is what a token may do: its own narrowed permissions, else the App's.
func (s *Server) tokenPermissions(p principal) map[string]string {
	if p.perms != nil {
		return p.perms
	}
	return s.cfg.appPerms
}

// installationPermissions is a permission map as go-github's InstallationPermissions.
func installationPermissions(perms map[string]string) *github.InstallationPermissions {
	out := &github.InstallationPermissions{}
	if data, err := json.Marshal(perms); err == nil {
		_ = json.Unmarshal(data, out)
	}
	return out
}

// outOfScope reports whether a request names a repository a narrowed token was not given:
// GitHub answers as if the repository did not exist (404), on the REST API
// (/repos/{owner}/{repo}/...) and over git.
func outOfScope(p principal, path string, isAPI bool) bool {
	if p.repos == nil {
		return false
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var owner, repo string
	switch {
	case isAPI && len(segs) >= 5 && segs[0] == "api" && segs[1] == "v3" && segs[2] == "repos":
		owner, repo = segs[3], segs[4]
	case !isAPI && len(segs) >= 2:
		owner, repo = segs[0], strings.TrimSuffix(segs[1], ".git")
	default:
		return false
	}
	return !p.repos[repoKey(owner, repo)]
}

// inScope reports whether a narrowed token (or any other principal) may see repository rm.
func (p principal) inScope(rm *repoMeta) bool {
	return p.repos == nil || p.repos[repoKey(rm.Owner, rm.Name)]
}
