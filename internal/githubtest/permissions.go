package githubtest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An installation token may do only what the App was granted: GitHub answers anything else
// 403 "Resource not accessible by integration". Which permission each endpoint needs is
// GitHub's documentation, written here independently of fleetbot's manifest:
// https://docs.github.com/rest/authentication/permissions-required-for-github-apps

// need is one permission at a level ("read" or "write").
type need struct{ perm, level string }

// anyOf is satisfied by any one of its needs (GitHub documents a few endpoints, e.g. labelling
// or commenting on a pull request, as "issues or pull requests").
type anyOf []need

func reads(perm string) anyOf  { return anyOf{{perm, "read"}} }
func writes(perm string) anyOf { return anyOf{{perm, "write"}} }

// none is an endpoint any installation token may call.
var none = anyOf{}

// routePermissions maps each route of the fake to what GitHub requires of an installation
// token for it. A route missing here is refused, so a new route must say what it needs.
var routePermissions = map[string]anyOf{
	"GET /installation/repositories": none,
	"GET /rate_limit":                none,
	"GET /":                          none,
	"GET /orgs/{org}":                none,
	"GET /users/{username}":          none,
	// GitHub answers /user to an installation token with 403 whatever it was granted; that
	// answer is the /user handler's, not a permission.
	"GET /user": none,

	"GET /orgs/{org}/repos":            reads("metadata"),
	"GET /users/{username}/repos":      reads("metadata"),
	"POST /orgs/{org}/repos":           writes("administration"),
	"GET /repos/{owner}/{repo}":        reads("metadata"),
	"PATCH /repos/{owner}/{repo}":      writes("administration"),
	"GET /repos/{owner}/{repo}/topics": reads("metadata"),
	"PUT /repos/{owner}/{repo}/topics": writes("administration"),

	"GET /repos/{owner}/{repo}/branches":                   reads("contents"),
	"GET /repos/{owner}/{repo}/branches/{branch}":          reads("contents"),
	"GET /repos/{owner}/{repo}/contents/{path...}":         reads("contents"),
	"PUT /repos/{owner}/{repo}/contents/{path...}":         writes("contents"),
	"GET /repos/{owner}/{repo}/compare/{basehead...}":      reads("contents"),
	"GET /repos/{owner}/{repo}/commits/{ref}":              reads("contents"),
	"POST /repos/{owner}/{repo}/git/blobs":                 writes("contents"),
	"GET /repos/{owner}/{repo}/git/blobs/{sha}":            reads("contents"),
	"GET /repos/{owner}/{repo}/git/trees/{sha...}":         reads("contents"),
	"POST /repos/{owner}/{repo}/git/trees":                 writes("contents"),
	"POST /repos/{owner}/{repo}/git/commits":               writes("contents"),
	"GET /repos/{owner}/{repo}/git/commits/{sha}":          reads("contents"),
	"GET /repos/{owner}/{repo}/git/ref/{ref...}":           reads("contents"),
	"GET /repos/{owner}/{repo}/git/matching-refs/{ref...}": reads("contents"),
	"POST /repos/{owner}/{repo}/git/refs":                  writes("contents"),
	"PATCH /repos/{owner}/{repo}/git/refs/{ref...}":        writes("contents"),
	"DELETE /repos/{owner}/{repo}/git/refs/{ref...}":       writes("contents"),

	"GET /repos/{owner}/{repo}/pulls":                            reads("pull_requests"),
	"POST /repos/{owner}/{repo}/pulls":                           writes("pull_requests"),
	"GET /repos/{owner}/{repo}/pulls/{number}":                   reads("pull_requests"),
	"PATCH /repos/{owner}/{repo}/pulls/{number}":                 writes("pull_requests"),
	"PUT /repos/{owner}/{repo}/pulls/{number}/merge":             writes("contents"),
	"GET /repos/{owner}/{repo}/pulls/{number}/reviews":           reads("pull_requests"),
	"POST /repos/{owner}/{repo}/pulls/{number}/reviews":          writes("pull_requests"),
	"POST /repos/{owner}/{repo}/issues":                          writes("issues"),
	"GET /repos/{owner}/{repo}/issues/{number}":                  {{"issues", "read"}, {"pull_requests", "read"}},
	"GET /repos/{owner}/{repo}/issues/{number}/comments":         {{"issues", "read"}, {"pull_requests", "read"}},
	"POST /repos/{owner}/{repo}/issues/{number}/comments":        {{"issues", "write"}, {"pull_requests", "write"}},
	"PATCH /repos/{owner}/{repo}/issues/comments/{id}":           {{"issues", "write"}, {"pull_requests", "write"}},
	"DELETE /repos/{owner}/{repo}/issues/comments/{id}":          {{"issues", "write"}, {"pull_requests", "write"}},
	"GET /repos/{owner}/{repo}/issues/{number}/labels":           {{"issues", "read"}, {"pull_requests", "read"}},
	"POST /repos/{owner}/{repo}/issues/{number}/labels":          {{"issues", "write"}, {"pull_requests", "write"}},
	"PUT /repos/{owner}/{repo}/issues/{number}/labels":           {{"issues", "write"}, {"pull_requests", "write"}},
	"DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}": {{"issues", "write"}, {"pull_requests", "write"}},

	"POST /repos/{owner}/{repo}/check-runs":              writes("checks"),
	"PATCH /repos/{owner}/{repo}/check-runs/{id}":        writes("checks"),
	"GET /repos/{owner}/{repo}/commits/{ref}/check-runs": reads("checks"),
	"POST /repos/{owner}/{repo}/statuses/{sha}":          writes("statuses"),
	"GET /repos/{owner}/{repo}/commits/{ref}/statuses":   reads("statuses"),

	"GET /orgs/{org}/teams":                                         reads("members"),
	"GET /orgs/{org}/teams/{team_slug}":                             reads("members"),
	"GET /orgs/{org}/teams/{team_slug}/members":                     reads("members"),
	"GET /orgs/{org}/teams/{team_slug}/memberships/{username}":      reads("members"),
	"GET /orgs/{org}/teams/{team_slug}/repos":                       reads("members"),
	"GET /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}":        reads("members"),
	"PUT /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}":        writes("administration"),
	"DELETE /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}":     writes("administration"),
	"GET /repos/{owner}/{repo}/teams":                               reads("administration"),
	"GET /repos/{owner}/{repo}/collaborators":                       reads("metadata"),
	"GET /repos/{owner}/{repo}/collaborators/{username}":            reads("metadata"),
	"PUT /repos/{owner}/{repo}/collaborators/{username}":            writes("administration"),
	"DELETE /repos/{owner}/{repo}/collaborators/{username}":         writes("administration"),
	"GET /repos/{owner}/{repo}/collaborators/{username}/permission": reads("metadata"),
	"GET /repos/{owner}/{repo}/branches/{branch}/protection":        reads("administration"),
	"PUT /repos/{owner}/{repo}/branches/{branch}/protection":        writes("administration"),
	"DELETE /repos/{owner}/{repo}/branches/{branch}/protection":     writes("administration"),
	"GET /repos/{owner}/{repo}/codeowners/errors":                   reads("metadata"),

	// Rulesets: a repository's read with metadata, written with administration; an
	// organization's read and written with the organization permission administration. Custom
	// properties: an organization's definitions read with organization_custom_properties and
	// written with it at admin; a repository's values read with metadata, written with
	// custom_properties.
	"GET /repos/{owner}/{repo}/rulesets":                 reads("metadata"),
	"POST /repos/{owner}/{repo}/rulesets":                writes("administration"),
	"GET /repos/{owner}/{repo}/rulesets/{ruleset_id}":    reads("metadata"),
	"PUT /repos/{owner}/{repo}/rulesets/{ruleset_id}":    writes("administration"),
	"DELETE /repos/{owner}/{repo}/rulesets/{ruleset_id}": writes("administration"),
	"GET /orgs/{org}/rulesets":                           reads("organization_administration"),
	"POST /orgs/{org}/rulesets":                          writes("organization_administration"),
	"GET /orgs/{org}/rulesets/{ruleset_id}":              reads("organization_administration"),
	"PUT /orgs/{org}/rulesets/{ruleset_id}":              writes("organization_administration"),
	"DELETE /orgs/{org}/rulesets/{ruleset_id}":           writes("organization_administration"),
	"GET /orgs/{org}/properties/schema":                  reads("organization_custom_properties"),
	"PATCH /orgs/{org}/properties/schema":                {{"organization_custom_properties", "admin"}},
	"GET /repos/{owner}/{repo}/properties/values":        reads("metadata"),
	"PATCH /repos/{owner}/{repo}/properties/values":      writes("custom_properties"),

	// GraphQL: a query reads repositories and pull requests; each mutation the fake runs needs
	// what its REST counterpart does: enablePullRequestAutoMerge writes a pull request,
	// updateRefs moves refs (as PATCH git/refs does).
	"POST /api/graphql query":                               reads("metadata"),
	"POST /api/graphql mutation enablePullRequestAutoMerge": writes("pull_requests"),
	"POST /api/graphql mutation updateRefs":                 writes("contents"),

	// git smart HTTP
	"GET /{owner}/{repo}/info/refs upload-pack":  reads("contents"),
	"GET /{owner}/{repo}/info/refs receive-pack": writes("contents"),
	"POST /{owner}/{repo}/git-upload-pack":       reads("contents"),
	"POST /{owner}/{repo}/git-receive-pack":      writes("contents"),
}

// levelRank orders permission levels: write includes read.
func levelRank(level string) int {
	switch level {
	case "read":
		return 1
	case "write":
		return 2
	case "admin":
		return 3
	}
	return 0
}

// permitted says whether granted permissions satisfy what route needs. key is the route,
// with " query"/" mutation" for GraphQL and the git service for info/refs.
func permitted(granted map[string]string, key string) (bool, bool) {
	needs, known := routePermissions[key]
	if !known {
		return false, false
	}
	if len(needs) == 0 {
		return true, true
	}
	for _, n := range needs {
		if levelRank(granted[n.perm]) >= levelRank(n.level) {
			return true, true
		}
	}
	return false, true
}

// permittedOK is permitted for one of several keys: it reports whether key is permitted and
// clears *known when no permission is documented for it.
func permittedOK(granted map[string]string, key string, known *bool) bool {
	ok, k := permitted(granted, key)
	if !k {
		*known = false
	}
	return ok
}

// permissionKey is the routePermissions key of a request (a GraphQL mutation's is followed by
// the name of each mutation it runs).
func permissionKey(r *http.Request, route string, graphQLRead bool) string {
	switch {
	case route == "POST /api/graphql" && graphQLRead:
		return route + " query"
	case route == "POST /api/graphql":
		return route + " mutation"
	case route == "GET /{owner}/{repo}/info/refs":
		return route + " " + strings.TrimPrefix(r.URL.Query().Get("service"), "git-")
	}
	return route
}

// errNotAccessible is GitHub's answer to an installation token lacking a permission.
var errNotAccessible = &httpError{status: http.StatusForbidden, message: "Resource not accessible by integration"}

// appManifest is the part of a GitHub App manifest (app.yml) the fake enforces.
// https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest
type appManifest struct {
	DefaultPermissions map[string]string `yaml:"default_permissions"`
	DefaultEvents      []string          `yaml:"default_events"`
}

// AppManifest is what the fake takes from a GitHub App manifest (app.yml): the permissions the
// App's installations hold (default_permissions: an installation token may do nothing else)
// and the events it subscribes to (default_events: what its webhooks carry). The in-test
// server (NewServer) and the fakegithub program both read the repository's app.yml through it,
// so that neither lets a token do what fleetbot's App could not.
type AppManifest struct {
	// Path is the file the manifest was read from.
	Path string
	// Permissions maps each permission to read, write or admin.
	Permissions map[string]string
	// Events are the webhook events the App subscribes to.
	Events []string
}

// LoadAppManifest reads a GitHub App manifest. A manifest that cannot be read or parsed, or
// grants no permission or an unknown level, is an error naming the file.
func LoadAppManifest(path string) (*AppManifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the GitHub App manifest: %w", err)
	}
	var m appManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parsing the GitHub App manifest %s: %w", path, err)
	}
	if len(m.DefaultPermissions) == 0 {
		return nil, fmt.Errorf("%s: default_permissions is empty: an App without permissions can do nothing", path)
	}
	for perm, level := range m.DefaultPermissions {
		if levelRank(level) == 0 {
			return nil, fmt.Errorf("%s: default_permissions.%s is %q; want read, write or admin", path, perm, level)
		}
	}
	return &AppManifest{Path: path, Permissions: m.DefaultPermissions, Events: m.DefaultEvents}, nil
}

// LoadAppPermissions reads the default_permissions of a GitHub App manifest (LoadAppManifest).
func LoadAppPermissions(path string) (map[string]string, error) {
	m, err := LoadAppManifest(path)
	if err != nil {
		return nil, err
	}
	return m.Permissions, nil
}

// RepoAppManifestPath is the App manifest of the repository the working directory is in:
// app.yml beside the go.mod above it. It is an error when there is none.
func RepoAppManifestPath() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("finding the repository's app.yml: %w", err)
	}
	path := filepath.Join(root, "app.yml")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("finding the repository's app.yml: %w", err)
	}
	return path, nil
}

// WithAppPermissions makes installation tokens do only what perms grants (permission ->
// read|write|admin, as in a manifest's default_permissions); anything else is 403 "Resource
// not accessible by integration". New uses the repository's app.yml when neither this nor
// WithAppManifest is given.
func WithAppPermissions(perms map[string]string) Option {
	return func(c *config) { c.appPerms = perms }
}

// WithAppManifest is WithAppPermissions with the manifest's permissions, and its events as the
// App's subscription (installation and installation_repositories are always delivered).
func WithAppManifest(m *AppManifest) Option {
	return func(c *config) { c.appPerms, c.appEvents = m.Permissions, m.Events }
}

// WithoutAppManifest lets installation tokens do anything, for a test of something else than
// permissions that has no manifest to read; say why at the call site.
func WithoutAppManifest() Option { return func(c *config) { c.noManifest = true } }
