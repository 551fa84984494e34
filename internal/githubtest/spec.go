package githubtest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// RESTSpecEnv names a file of GitHub's REST API description (a file of the npm package
// @octokit/openapi, e.g. ghes-3.17.json) to check against instead of the committed compact copy
// of api.github.com's (SchemaCopiesDir).
const RESTSpecEnv = "FLEETBOT_GITHUB_REST_SPEC"

// restSpec is GitHub's REST description of api.github.com as the tests check against it: the
// committed compact copy (RESTCopy; the operations the fake serves in full, every other one by
// name), checked against the whole published description when `make schemas` installed it.
// Loaded once per test binary, read-only afterwards. Only NewServer (test scope) uses it; a
// Server built with New checks nothing unless given WithRESTSpec.
var restSpec = sync.OnceValues(func() (*restspec.Description, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	if path := os.Getenv(RESTSpecEnv); path != "" {
		return restspec.LoadCompact(path, filepath.Join(root, restSpecCache), restPatterns())
	}
	return loadSpecCopy(root, RESTCopy)
})

// ghesSpec is restSpec for GitHub Enterprise Server: the compact copy of the newest GHES
// description @octokit/openapi has (a server started WithEnterpriseServer is checked against it).
var ghesSpec = sync.OnceValues(func() (*restspec.Description, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	name, err := GHESCopy()
	if err != nil {
		return nil, err
	}
	return loadSpecCopy(root, name)
})

// loadSpecCopy loads the compact copy name of SchemaCopiesDir; an exchange of an operation it
// knows by name only is checked against the published description of the same name when it is
// installed, and not checked otherwise (the fake does not serve it: it answers 404).
func loadSpecCopy(root, name string) (*restspec.Description, error) {
	return restspec.LoadCopy(filepath.Join(root, SchemaCopiesDir, name), filepath.Join(root, publishedDir, "openapi", "generated", name))
}

// restSpecCache is where a description named by RESTSpecEnv is cached compacted, under the
// module root (next to what scripts/github-schemas.sh installs; not committed).
const restSpecCache = ".cache/github-schemas/compact"

// WithRESTSpec checks every REST request the server receives and every response it sends
// against d, handing each departure to report (from the server's goroutines).
func WithRESTSpec(d *restspec.Description, report func(restspec.Violation)) Option {
	return func(c *config) { c.spec, c.specReport = d, report }
}

// WithoutRESTSpec turns NewServer's conformance check off, for a test that sends GitHub
// requests it would refuse on purpose (hostile input); say why at the call site.
func WithoutRESTSpec() Option { return func(c *config) { c.noSpec = true } }

// specChecker collects the violations of one test's server and reports them when it closes.
type specChecker struct {
	mu   sync.Mutex
	seen map[string]int // violation line -> count
}

func (c *specChecker) add(v restspec.Violation) {
	for _, e := range descriptionErrors {
		if e.operation == v.Operation && e.match(v) {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[v.String()]++
}

func (c *specChecker) report(t testing.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := make([]string, 0, len(c.seen))
	for l, n := range c.seen {
		if n > 1 {
			l = fmt.Sprintf("%s (%d times)", l, n)
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Errorf("GitHub's REST description refuses: %s", l)
	}
}

// descriptionErrors are the departures where GitHub's REST description (@octokit/openapi, as
// pinned in scripts/github-schemas.sh) contradicts GitHub's own documentation and the answers
// GitHub gives; each is tolerated for its operation and shape only. The fake's answers are
// otherwise complete: never add an entry to hide the fake's own divergence.
var descriptionErrors = []struct {
	operation string
	match     func(restspec.Violation) bool
	why       string
}{
	{
		operation: "apps/list-installations",
		match: func(v restspec.Violation) bool {
			return v.Side == "response" && v.Missing && listedAccountField.MatchString(v.Detail)
		},
		why: "the description inlines each installation's account as allOf simple-user AND enterprise " +
			"(its `installation` schema, used by every other installation answer, says anyOf); GitHub's " +
			"documented example of the list has a plain simple-user account",
	},
	{
		operation: "repos/create-in-org",
		match: func(v restspec.Violation) bool {
			return v.Side == "request" && strings.HasPrefix(v.Detail, "field visibility: value is not one of") &&
				strings.Contains(v.Detail, "(value internal)")
		},
		why: "the description lists visibility public and private only; GitHub's documentation of the same " +
			"operation says an organization of an enterprise account can also ask for internal",
	},
	{
		operation: "repos/update-branch-protection",
		match: func(v restspec.Violation) bool {
			return v.Side == "request" && v.Missing && strings.HasPrefix(v.Detail, `field required_status_checks.contexts: property "contexts" is missing`)
		},
		why: "the description requires the deprecated contexts in required_status_checks; GitHub's documentation says " +
			"\"use checks instead of contexts\", and GitHub takes exactly one of the two: checks alone is accepted, both " +
			"or neither are 422 (google/go-github#2276, google/go-github#2976, ossf/allstar#155); only checks binds a check " +
			"to an App",
	},
}

// listedAccountField is a property of an installation's account in a list of installations.
var listedAccountField = regexp.MustCompile(`^field [0-9]+\.account\.(name|slug|created_at|updated_at): property "[a-z_]+" is missing`)

// specOption is NewServer's conformance check: GitHub's description (of GHES when ghes). A
// description that cannot be loaded fails the test: the compact copies are committed.
func specOption(t testing.TB, ghes bool) (Option, func()) {
	load := restSpec
	if ghes {
		load = ghesSpec
	}
	return specOptionFrom(t, load)
}

// specOptionFrom is specOption with its loader passed in.
func specOptionFrom(t testing.TB, load func() (*restspec.Description, error)) (Option, func()) {
	d, err := load()
	if err != nil {
		t.Fatalf("loading GitHub's REST description for the conformance check: %v (run make schemas)", err)
		return func(*config) {}, func() {}
	}
	c := &specChecker{seen: map[string]int{}}
	return WithRESTSpec(d, c.add), func() { c.report(t) }
}

// specCheckable says whether a request is one the REST description covers (not GraphQL, not
// git smart HTTP).
func specCheckable(path string) bool {
	return strings.HasPrefix(path, apiPrefix+"/") || path == apiPrefix
}

// checkSpec validates one answered REST exchange against the description.
func (s *Server) checkSpec(r *http.Request, reqBody []byte, status int, h http.Header, body []byte) {
	req := r.Clone(r.Context())
	req.URL.Path = strings.TrimPrefix(r.URL.Path, apiPrefix)
	req.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, apiPrefix)
	for _, v := range s.cfg.spec.Check(r.Context(), restspec.Exchange{
		Request: req, RequestBody: reqBody, Status: status, Header: h, ResponseBody: body,
	}) {
		s.cfg.specReport(v)
	}
}

// RESTSpec returns GitHub's REST description as NewServer uses it (loaded once per test
// binary), or an error saying what is wrong.
func RESTSpec() (*restspec.Description, error) { return restSpec() }
