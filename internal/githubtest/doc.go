// Package githubtest is a stateful fake GitHub for tests and demos: an in-process HTTP server
// with real git storage, the REST endpoints fleetbot uses, GitHub's limits, fault injection, a
// request log and webhooks.
//
// # Use
//
// In a test:
//
//	srv := githubtest.NewServer(t)                        // closed by t.Cleanup
//	srv.CreateTeam("acme", "platform", "alice")           // org + App installation + team
//	srv.CreateRepo("acme", "cluster-a", map[string]string{"README.md": "hi\n"})
//	c := srv.ClientWithToken(srv.InstallationToken("acme")) // go-github v62, Enterprise URLs
//	...
//	assert.Zero(t, srv.Counts().Writes)                   // "this no-op made zero writes"
//
// As a program: go run ./internal/githubtest/cmd/fakegithub --addr 127.0.0.1:8080 --state DIR
// (see its flags); point fleetbot at GITHUB_API_URL=http://127.0.0.1:8080/api/v3/.
//
// The REST API is mounted under /api/v3 as on GitHub Enterprise, so github.NewEnterpriseClient
// and WithEnterpriseURLs(srv.APIURL(), ...) work. Git smart HTTP (clone, fetch, push) is served
// at /{owner}/{repo}.git by the git binary's http-backend over the same bare repositories the
// REST side reads with go-git, under the same lock: a commit made through the Git Data API is
// clonable, and a push is visible through REST (and merges or closes pull requests as on GitHub).
// The REST side keeps each repository open between requests (object cache, reference copy)
// and writes new objects as loose files at once (uncompressed, through internal/gitloose); a
// git request drops the opened repository so that what git wrote is read afresh.
// WithTLS serves HTTPS instead, for a client that is to be given the server's certificate as
// its CA (CertPEM), as Flux's notification-controller and source-controller are in make e2e.
//
// # Routes (paths under /api/v3)
//
//	apps        GET /app, /app/installations, /app/installations/{id}, /orgs/{org}/installation,
//	            /users/{u}/installation, /repos/{o}/{r}/installation (App JWT);
//	            POST /app/installations/{id}/access_tokens (JWT -> token with expires_at);
//	            GET /installation/repositories; GET /rate_limit
//	accounts    GET /orgs/{org}, /users/{u}, /user
//	repos       GET/PATCH /repos/{o}/{r} (archived, default_branch, visibility, description);
//	            POST /orgs/{org}/repos, /user/repos; GET /orgs/{org}/repos, /users/{u}/repos,
//	            /user/repos; GET/PUT /repos/{o}/{r}/topics; GET /branches, /branches/{b};
//	            GET/PUT /contents/{path} (PUT also bootstraps an empty repo);
//	            GET /compare/{base}...{head}; GET /commits/{ref}
//	git data    POST /git/blobs, GET /git/blobs/{sha}; GET /git/trees/{sha|branch}?recursive=1;
//	            POST /git/trees (base_tree, inline content, sha, sha:null deletes, nested paths);
//	            POST /git/commits, GET /git/commits/{sha}; GET /git/ref/{ref},
//	            GET /git/matching-refs/{prefix}; POST /git/refs; PATCH /git/refs/{ref} (force;
//	            422 "Update is not a fast forward"); DELETE /git/refs/{ref}.
//	            Every Git Data call on an empty repository answers 409 "Git Repository is empty.".
//	pulls       GET/POST /pulls (head=owner:branch, state, base; 422 on a duplicate open head),
//	            GET/PATCH /pulls/{n}, PUT /pulls/{n}/merge (merge commit, or one commit for
//	            squash/rebase; path-level three-way merge, 405 on conflict, on a method the
//	            repo does not allow, and while the base branch's protection is not met),
//	            GET/POST /pulls/{n}/reviews
//	issues      POST /issues, GET /issues/{n}, GET/POST /issues/{n}/comments,
//	            PATCH/DELETE /issues/comments/{id}, GET/POST/PUT /issues/{n}/labels,
//	            DELETE /issues/{n}/labels/{name}
//	checks      POST /check-runs, PATCH /check-runs/{id} (at most 50 annotations a request, each
//	            request's appended: CheckRunAnnotations), GET /commits/{ref}/check-runs,
//	            POST /statuses/{sha}, GET /commits/{ref}/statuses
//	access      GET /orgs/{org}/teams, /teams/{slug}, /teams/{slug}/members,
//	            /teams/{slug}/memberships/{u}, /teams/{slug}/repos;
//	            GET/PUT/DELETE /orgs/{org}/teams/{slug}/repos/{o}/{r}; GET /repos/{o}/{r}/teams;
//	            GET /collaborators, GET/PUT/DELETE /collaborators/{u}, GET .../{u}/permission;
//	            GET/PUT/DELETE /branches/{b}/protection (404 "Branch not protected"; required
//	            status checks with the App each must come from);
//	            GET /codeowners/errors (unknown @user / @org/team owners, owners without write
//	            access, negation and character-range patterns, malformed owners)
//	graphql     POST /api/graphql: the queries of graphQLSubset's fields and the
//	            enablePullRequestAutoMerge mutation
//
// Responses are go-github v62 types marshalled to JSON (repositories, pull requests and git
// commits completed with every property GitHub's description requires), errors are GitHub's
// {"message", "errors", "documentation_url"}. GET responses carry a weak ETag of the body as
// one token and media type saw it, and Vary: Accept, Authorization: a matching If-None-Match
// from the same token answers 304, from another token 200.
//
// NewServer checks every REST request and response against GitHub's OpenAPI description (the
// committed compact copy of api.github.com's, or of the newest GHES's WithEnterpriseServer:
// SchemaCopiesDir, regenerated by `make schemas`) and fails the test with each departure
// (operation and field) when it closes. WithRESTSpec hands violations to a function instead.
// Lists honour per_page (default 30, max 100) and page and send a Link header.
//
// # Authentication
//
// REST calls need "Authorization: token X" or "Bearer X" with a personal access token
// (DefaultToken of DefaultUser, WithUser, CreateUser, AddToken) or an installation token;
// anything else is 401 "Bad credentials" (WithAnonymousReads lets unauthenticated GETs in).
// Installation tokens expire after WithTokenLifetime (one hour) of fake time. The /app routes
// need an RS256 JWT signed with the App key (AppPrivateKeyPEM, generated on first use, or
// WithAppKey / WithAppPublicKey) with iss = the App id, checked against the wall clock: a
// wrong key, expiry or issuer is 401. Git HTTP takes basic auth x-access-token:TOKEN.
// Commits created through the API without an author are authored and committed by the
// caller ("<slug>[bot]" for installation tokens) and reported verified.
// Installation tokens may do only what the App's permissions grant (WithAppPermissions,
// WithAppManifest; New, for tests and the program alike, reads the repository's app.yml):
// anything else is 403 "Resource not accessible by integration"; a token asked for some
// repositories or permissions gets only those (422 when more is asked than the installation
// holds). A user's token is not limited per repository. An API request without a User-Agent is
// 403; an App JWT must expire within ten minutes.
// Archived repositories are read-only (403). An organization on GitHub Free (SetOrgPlan(org,
// PlanFree)) has no branch protection on private repositories: 403 "Upgrade to GitHub Pro or
// make this repository public to enable this feature.".
//
// # Limits and time
//
// Every API response carries x-ratelimit-limit/remaining/used/reset/resource. The primary limit
// (WithPrimaryLimit, default 5000 per hour per token or installation; 0 disables) answers 403,
// or 429 with WithPrimaryLimitStatus, with x-ratelimit-remaining: 0. 304s and GET /rate_limit
// are free. GraphQL has its own budget in points (WithGraphQLLimit, graphqlbudget.go). Secondary limits are off by default: WithConcurrencyLimit(n) rejects a request
// while n others are in flight, WithContentCreationLimit(perMinute, perHour, retryAfter)
// rejects content-creating requests over budget with 403 "You have exceeded a secondary rate
// limit..." and, if retryAfter, a Retry-After header. The documentation_url ends in
// "secondary-rate-limits" so go-github returns *github.AbuseRateLimitError.
// WithPointsLimit(perMinute, retryAfter) counts GitHub's points per principal and endpoint
// group (REST, GraphQL; a read or query 1, anything else 5); WithMutationPacing(d) refuses a
// mutation sent while another of the principal's is in flight or less than d after the
// previous one; WithSecondaryLimitStatus(429) answers every secondary limit with 429.
//
// All windows, expiries and timestamps use a fake clock: WithTimeScale(3600) makes an hour
// pass per wall second, AdvanceClock jumps ahead, WithManualClock freezes it between jumps
// (a client whose clock sleeps by AdvanceClock then shares the fake's time exactly). Values a client schedules on
// (x-ratelimit-reset, Retry-After, token expires_at) are converted to wall time, so a real
// client that honours them waits the right (scaled) amount.
//
// # Request log and faults
//
// Requests returns every call (REST and git HTTP) with its method, path, matched Route
// ("POST /repos/{owner}/{repo}/git/commits", without /api/v3), Class, Status (0 for a dropped
// connection), Principal and fake Time. Class is Read (GET, git fetch/clone), Write, or
// ContentCreating (blobs, trees, commits, refs, contents, pull requests, merges, issues,
// comments, repos, git pushes). Counts sums them (Writes includes ContentCreating); ResetLog
// clears the log, typically after setup. Test helpers (CreateRepo, Commit, ...) bypass HTTP
// and are not logged.
//
// Changed returns a channel closed at the fake's next change of state (a request of any class
// but Read answered, a webhook delivery made, AdvanceClock): a test waits on it, re-checking its
// condition after each change, instead of polling on a timer. Reads do not signal.
//
// Fault(pattern, FaultSpec) injects a Status, a Latency (counted as in flight), a Drop of
// the connection, or a LoseResponse (the request is handled, then the connection is closed
// without an answer: a write whose response timed out), for a route as the log names it, a
// "METHOD /path/glob*" or "*", limited to Times calls or only the OnCall-th matching call.
// Faults run before authentication and limits. Note that net/http retries an idempotent
// request once after a dropped connection.
//
// # GitHub's behaviours the fake reproduces
//
// Commits made through the API without author or committer: an App's are authored by its bot,
// committed by "GitHub <noreply@github.com>" and verified; a personal access token's are the
// user's own and unsigned; with WithEnterpriseServer nothing is signed. GET /user with an
// installation token is 403 "Resource not accessible by integration". Visibility internal only
// for organizations marked SetOrgEnterprise, or on WithEnterpriseServer. Repos created through
// the API do not allow auto-merge unless asked; enablePullRequestAutoMerge refuses with
// GitHub's messages when the repo does not allow it and when the pull request is already clean
// (mergeable, nothing the base protection waits for). The other rules of GitHub the fake
// enforces (check runs, text sizes, topics, branch protection bodies, merges) are listed in
// docs/github.md, "Rules of the fake", each with its test.
//
// # Webhooks
//
// Deliver signs a payload (X-Hub-Signature-256 and X-Hub-Signature), sets X-GitHub-Event,
// X-GitHub-Delivery and a GitHub-Hookshot user agent, and POSTs it. PushEvent,
// PullRequestEvent, InstallationEvent, CheckRunEvent and CheckSuiteEvent build payloads from the
// current state as GitHub's published webhook schemas describe them (a *Payload; Decode gives a
// go-github event). With WithWebhook the server delivers the events its App subscribes to
// (app.yml's default_events): push, pull_request (opened, synchronize, closed, reopened,
// edited), status (a commit status created), check_run (created, completed) and installation,
// asynchronously and in order; WaitWebhooks waits for them, Close cancels those in flight.
//
// # Not implemented
//
// Review requests and pending reviews, rulesets, branch protection on pushes and ref moves
// (enforced on merges only: reviews, code owners, required status checks bound to their App as
// on GitHub), strict status checks (an out-of-date branch merges), collaborator invitations
// (PUT adds at once), tags through REST, forks, search, the Checks suites API, auto-merge
// carried out (it is recorded), Actions, and GraphQL beyond graphQLSubset.
package githubtest
