package github

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// scanPageSize is how many repositories one GraphQL query reads: GitHub's connection limit.
const scanPageSize = 100

// scanPRs is how many pull requests from the bot branch one query reads per repository: the
// newest same-repository one is wanted, and a fork's PR with the same branch name can come first.
const scanPRs = 3

// repoFields is what one scan reads of each repository: what Org and ListManaged need (name,
// archived, topics, description), the node id updateRefs names it by (refs.go), and what
// Snapshot needs to tell an unchanged repo (the heads of the default and bot branches, the
// newest pull request from the bot branch), plus what a status view shows at no extra request:
// the combined status of both heads (Flux posts one on the commit it applied; the bot head's is
// the pull request's checks) and the pull request's age and review decision, and the default
// branch head's commit statuses (Flux's, per Kustomization or HelmRelease: a failing one's
// message and link). None of these are connections, so they add nothing to the query's cost.
var repoFields = `id name isArchived description autoMergeAllowed
      repositoryTopics(first: 20) { nodes { topic { name } } }
      base: ref(qualifiedName: $base) { target { oid ... on Commit { statusCheckRollup { state } status { contexts { context state description targetUrl } } } } }
      bot: ref(qualifiedName: $bot) { target { oid ... on Commit { statusCheckRollup { state } } } }
      pullRequests(headRefName: $botName, baseRefName: $baseName, first: ` + strconv.Itoa(scanPRs) + `, orderBy: {field: CREATED_AT, direction: DESC}, states: [OPEN, CLOSED, MERGED]) {
        nodes { number state title body url headRefName baseRefName headRefOid isCrossRepository createdAt reviewDecision }
      }`

// ownerScanQuery reads one page of an owner's repositories (an organization or a user).
var ownerScanQuery = `query($owner: String!, $after: String, $base: String!, $bot: String!, $baseName: String!, $botName: String!) {
  repositoryOwner(login: $owner) {
    repositories(first: 100, after: $after, ownerAffiliations: [OWNER], orderBy: {field: NAME, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes { ` + repoFields + ` }
    }
  }
}`

type scanRef struct {
	Target struct {
		OID               string `json:"oid"`
		StatusCheckRollup *struct {
			State string `json:"state"`
		} `json:"statusCheckRollup"`
		// Status is the commit's statuses, the newest of each context (the base head only).
		Status *struct {
			Contexts []struct {
				Context     string  `json:"context"`
				State       string  `json:"state"`
				Description *string `json:"description"`
				TargetURL   *string `json:"targetUrl"`
			} `json:"contexts"`
		} `json:"status"`
	} `json:"target"`
}

// failing is the head's failing commit statuses, in pr's words.
func (r *scanRef) failing() []pr.CommitStatus {
	if r == nil || r.Target.Status == nil {
		return nil
	}
	var all []pr.CommitStatus
	for _, c := range r.Target.Status.Contexts {
		all = append(all, pr.CommitStatus{Context: c.Context, State: strings.ToLower(c.State),
			Description: deref(c.Description), TargetURL: deref(c.TargetURL)})
	}
	return pr.Failing(all)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// status is the head's combined status in pr's words ("" when it has none).
func (r *scanRef) status() string {
	if r == nil || r.Target.StatusCheckRollup == nil {
		return ""
	}
	return strings.ToLower(r.Target.StatusCheckRollup.State)
}

type scanPR struct {
	Number            int       `json:"number"`
	State             string    `json:"state"`
	Title             string    `json:"title"`
	Body              string    `json:"body"`
	URL               string    `json:"url"`
	HeadRefName       string    `json:"headRefName"`
	BaseRefName       string    `json:"baseRefName"`
	HeadRefOID        string    `json:"headRefOid"`
	IsCrossRepository bool      `json:"isCrossRepository"`
	CreatedAt         time.Time `json:"createdAt"`
	ReviewDecision    string    `json:"reviewDecision"`
}

type scanRepo struct {
	ID               string  `json:"id"`
	Name             string  `json:"name"`
	IsArchived       bool    `json:"isArchived"`
	Description      *string `json:"description"`
	AutoMergeAllowed *bool   `json:"autoMergeAllowed"`
	RepositoryTopics struct {
		Nodes []struct {
			Topic struct {
				Name string `json:"name"`
			} `json:"topic"`
		} `json:"nodes"`
	} `json:"repositoryTopics"`
	Base         *scanRef `json:"base"`
	Bot          *scanRef `json:"bot"`
	PullRequests struct {
		Nodes []scanPR `json:"nodes"`
	} `json:"pullRequests"`
}

// hintMaxAge is how long what a scan saw of a repo may answer the repo's next Snapshot. A
// run plans its repos right after its scan; a hint no Snapshot took (a repo the run did not
// plan) must not answer one much later, when the repo may have moved since.
const hintMaxAge = 10 * time.Minute

// headHint is what a scan saw of one repo, for the Snapshots after it. It answers them only
// while the repo's cached state is the one it was recorded beside (or last answered with): once
// the forge learns anything newer of the repo (its own write, a pull request found closed, a
// read), the scan is older than the state and the next Snapshot reads the repo.
type headHint struct {
	at       time.Time // when the scan read it (the forge's clock)
	seen     stateMark // the cached state it is valid beside
	base     string    // default branch head, "" when missing
	bot      string    // bot branch head, "" when missing
	pr       *pr.PullRequest
	prKnown  bool // false when only fork PRs came back: look the PR up as usual
	branches [2]string
	// For status views only (never cached): the heads' combined statuses, the review decision
	// of pr, and the source of the newest merged pull request seen.
	baseStatus, botStatus, review, merged string
	baseFailing                           []pr.CommitStatus
}

// decorate adds the status-view facts of the scan to a snapshot of the same heads.
// A nil hint (no scan before this snapshot) adds nothing.
func (h *headHint) decorate(s *pr.Snapshot) {
	if h == nil {
		return
	}
	if s.Base != nil && s.Base.SHA == h.base {
		s.Base.Status, s.Base.Failing = h.baseStatus, h.baseFailing
	}
	if s.Bot != nil && s.Bot.SHA == h.bot {
		s.Bot.Status = h.botStatus
	}
	if s.PR != nil && h.pr != nil && s.PR.Number == h.pr.Number {
		s.PR.Review = h.review
	}
	s.Merged = h.merged
}

// Scan implements reconcile.Scanner: the owner's teams (REST, one page per 100 teams), then
// every repository of the owner — or only the named ones — with its archived flag, topics,
// the heads of the default and bot branches and its newest bot pull request, 100 repositories
// a GraphQL query. A following Snapshot of a repo whose heads did not move since the cached
// state answers from that state with no request at all, whatever token the cache was filled
// with (ETags vary by token: an installation token rotates every hour and would turn every
// conditional request into a full read).
//
// GitHub API docs: https://docs.github.com/graphql/reference/interfaces#repositoryowner
func (f *Forge) Scan(ctx context.Context, owner, defaultBranch, botBranch string, only []string) (policy.Org, []pr.ManagedRepo, error) {
	o, err := f.orgTeams(ctx, owner)
	if err != nil {
		return o, nil, err
	}
	vars := map[string]any{
		"owner": owner, "base": "refs/heads/" + defaultBranch, "bot": "refs/heads/" + botBranch,
		"baseName": defaultBranch, "botName": botBranch,
	}
	var repos []scanRepo
	if only != nil {
		repos, err = f.scanNamed(ctx, owner, only, vars)
	} else {
		repos, err = f.scanOwner(ctx, owner, vars)
	}
	if err != nil {
		return o, nil, err
	}
	at := f.opts.Now()
	listed := make([]*gh.Repository, 0, len(repos))
	for _, r := range repos {
		if r.IsArchived {
			o.Archived = append(o.Archived, r.Name)
		}
		gr := &gh.Repository{Name: gh.String(r.Name), Archived: gh.Bool(r.IsArchived), Description: r.Description}
		for _, t := range r.RepositoryTopics.Nodes {
			gr.Topics = append(gr.Topics, t.Topic.Name)
		}
		listed = append(listed, gr)
		f.hint(owner, r, defaultBranch, botBranch, at)
	}
	if only != nil {
		return o, nil, nil
	}
	return o, managed(listed), nil
}

// hint records what the scan saw of one repo for its next Snapshot, replacing what an earlier
// scan saw: the newest scan of a repo is the one its next Snapshot may use, whichever run made
// it (runs over other repos may scan meanwhile).
func (f *Forge) hint(owner string, r scanRepo, defaultBranch, botBranch string, at time.Time) {
	h := &headHint{at: at, branches: [2]string{defaultBranch, botBranch}}
	if r.Base != nil {
		h.base = r.Base.Target.OID
	}
	if r.Bot != nil {
		h.bot = r.Bot.Target.OID
	}
	h.baseStatus, h.botStatus = r.Base.status(), r.Bot.status()
	h.baseFailing = r.Base.failing()
	h.prKnown = true
	for _, p := range r.PullRequests.Nodes {
		if p.IsCrossRepository {
			continue
		}
		if h.pr == nil {
			h.pr = &pr.PullRequest{Number: p.Number, State: strings.ToLower(p.State), Head: p.HeadRefName, Base: p.BaseRefName,
				Title: p.Title, Body: p.Body, URL: p.URL, HeadSHA: p.HeadRefOID, CreatedAt: p.CreatedAt}
			h.review = strings.ToLower(p.ReviewDecision)
		}
		if strings.EqualFold(p.State, "MERGED") {
			h.merged = pr.SourceOf(p.Body)
			break
		}
	}
	if h.pr == nil && len(r.PullRequests.Nodes) == scanPRs {
		h.prKnown = false // three fork PRs: ours may be older
	}
	e, unlock := f.entry(owner, r.Name)
	h.seen = markOf(e.st)
	e.hint = h
	e.autoMergeSeen = r.AutoMergeAllowed
	if r.ID != "" {
		e.nodeID = r.ID
	}
	unlock()
}

// hintFor returns a repo's hint from its latest scan for these branches; nil when there is
// none, it is older than hintMaxAge, or the forge learned something of the repo since. The
// hint stays: every run that plans the repo before anything changes may use it (two runs
// scanning and planning at once, a check's plan beside a drift's, both answer from it).
func (f *Forge) hintFor(e *repoEntry, defaultBranch, botBranch string) *headHint {
	h := e.hint
	if h == nil || h.branches != [2]string{defaultBranch, botBranch} || f.opts.Now().Sub(h.at) > hintMaxAge || h.seen != markOf(e.st) {
		return nil
	}
	return h
}

// stateMark identifies a cached repo state: every change of what Snapshot answers replaces one
// of these pointers or flags (the state, its heads, its pull request) or the refs' ETag.
type stateMark struct {
	st            *repoState
	base, bot     *pr.Commit
	pr            *pr.PullRequest
	prRead, empty bool
	etag          string
	branches      int
}

func markOf(st *repoState) stateMark {
	if st == nil {
		return stateMark{}
	}
	return stateMark{st: st, base: st.Base, bot: st.Bot, pr: st.PR, prRead: st.PRRead, empty: st.Empty, etag: st.RefsETag, branches: len(st.Branches)}
}

// unchanged reports whether a hint shows the cached state still current: both branch heads
// where the state has them, and the state complete (its PR looked up).
func (h *headHint) unchanged(st *repoState) bool {
	if st == nil || !st.PRRead || !h.prKnown {
		return false
	}
	base, bot := "", ""
	if st.Base != nil {
		base = st.Base.SHA
	}
	if st.Bot != nil {
		bot = st.Bot.SHA
	}
	return base == h.base && bot == h.bot
}

// scanOwner reads every repository of owner, one page of 100 after the other (GraphQL cursors
// cannot be guessed, so pages cannot be read at once).
func (f *Forge) scanOwner(ctx context.Context, owner string, vars map[string]any) ([]scanRepo, error) {
	var all []scanRepo
	var after any
	for {
		vars["after"] = after
		var data struct {
			RepositoryOwner *struct {
				Repositories struct {
					PageInfo struct {
						HasNextPage bool   `json:"hasNextPage"`
						EndCursor   string `json:"endCursor"`
					} `json:"pageInfo"`
					Nodes []scanRepo `json:"nodes"`
				} `json:"repositories"`
			} `json:"repositoryOwner"`
		}
		if err := f.graphQL(ctx, ownerScanQuery, vars, &data); err != nil {
			return nil, fmt.Errorf("listing the repos of %s: %w", owner, err)
		}
		if data.RepositoryOwner == nil {
			return nil, fmt.Errorf("listing the repos of %s: no organization or user of that name is visible to fleetbot: %w", owner, pr.ErrNotFound)
		}
		rs := data.RepositoryOwner.Repositories
		all = append(all, rs.Nodes...)
		if !rs.PageInfo.HasNextPage {
			return all, nil
		}
		after = rs.PageInfo.EndCursor
	}
}

// scanNamed reads the named repositories of owner, 100 a query (one aliased field each); a
// repository that does not exist is left out.
func (f *Forge) scanNamed(ctx context.Context, owner string, names []string, vars map[string]any) ([]scanRepo, error) {
	var all []scanRepo
	for start := 0; start < len(names); start += scanPageSize {
		batch := names[start:min(start+scanPageSize, len(names))]
		for i, name := range batch {
			vars[fmt.Sprintf("n%d", i)] = name
		}
		data := map[string]*scanRepo{}
		if err := f.graphQL(ctx, namedScanQuery(len(batch)), vars, &data, "NOT_FOUND"); err != nil {
			return nil, fmt.Errorf("reading repos of %s: %w", owner, err)
		}
		for i := range batch {
			if r := data[fmt.Sprintf("r%d", i)]; r != nil {
				all = append(all, *r)
			}
		}
		for i := range batch {
			delete(vars, fmt.Sprintf("n%d", i))
		}
	}
	return all, nil
}

// graphQL runs one GraphQL query and decodes its data. GitHub answers field errors with 200 and
// an errors list; those of the types in tolerate (e.g. NOT_FOUND for a missing repository,
// whose field is then null) are not errors here.
//
// GitHub API docs: https://docs.github.com/graphql/guides/forming-calls-with-graphql
func (f *Forge) graphQL(ctx context.Context, query string, vars map[string]any, data any, tolerate ...string) error {
	req, err := f.api.NewRequest(http.MethodPost, graphQLURL(f.api.BaseURL.String()), map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	// The answer is decoded once, straight into data: the scan's answers are the largest
	// fleetbot reads (100 repos a page, pull request bodies included), and decoding them
	// twice (the envelope, then its data) was a tenth of a busy service's CPU.
	var raw bytes.Buffer
	resp, err := f.postGraphQL(ctx, req, &raw)
	if err != nil {
		return err
	}
	out := struct {
		Data   any `json:"data"`
		Errors []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Path    []any  `json:"path"`
		} `json:"errors"`
	}{Data: data}
	if err := json.Unmarshal(raw.Bytes(), &out); err != nil {
		return fmt.Errorf("GraphQL: decoding the answer: %w", err)
	}
	for _, e := range out.Errors {
		if e.Type == "RATE_LIMITED" {
			return graphQLRateLimited(req, resp)
		}
		if !slices.Contains(tolerate, e.Type) {
			return fmt.Errorf("GraphQL: %s (at %v)", e.Message, e.Path)
		}
	}
	// A null data (a JSON null sets the field to nil) answers nothing. GraphQL leaves data out
	// only with an error raised before execution, never one of the tolerated field errors.
	if out.Data == nil {
		return fmt.Errorf("GraphQL: no data in the answer")
	}
	return nil
}

// postGraphQL sends a GraphQL request through the client's transports (limits, budget,
// counting, cache) and copies the answer's body into into. Not through go-github's Do: go-github
// files the x-ratelimit-* headers of an answer under the rate category of its path, and the
// GraphQL path of GitHub Enterprise Server (/api/graphql, unlike api.github.com's /graphql) is
// "core" to it, so a spent GraphQL budget, which is apart from the REST one, would stop every
// REST call of the client until the GraphQL budget reset ("not making remote request").
func (f *Forge) postGraphQL(ctx context.Context, req *http.Request, into io.Writer) (*http.Response, error) {
	resp, err := f.api.Client().Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := gh.CheckResponse(resp); err != nil {
		return resp, err
	}
	if _, err := io.Copy(into, resp.Body); err != nil {
		return resp, fmt.Errorf("GraphQL: reading the answer: %w", err)
	}
	return resp, nil
}

// graphQLRateLimited is the error of a GraphQL call refused for its own budget: GitHub answers
// it 200 with an error of type RATE_LIMITED and x-ratelimit-remaining: 0 (the GraphQL budget is
// apart from the REST one, in points); the call may be sent again after x-ratelimit-reset, so it
// is an ErrRateLimited the caller defers the work on, not a failure.
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api
func graphQLRateLimited(req *http.Request, resp *http.Response) error {
	reset := time.Now().Add(time.Hour)
	if resp != nil {
		if v, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			reset = time.Unix(v, 0)
		}
	}
	return &RateLimitedError{Method: req.Method, URL: redact(req.URL), Reset: reset, Reason: "GraphQL points"}
}

// graphQLURL is the GraphQL endpoint beside a REST base URL: api.github.com/graphql, or
// HOST/api/graphql on GitHub Enterprise Server (REST at HOST/api/v3/).
func graphQLURL(restBase string) string {
	if base, ok := strings.CutSuffix(restBase, "/api/v3/"); ok {
		return base + "/api/graphql"
	}
	return strings.TrimSuffix(restBase, "/") + "/graphql"
}

// namedScanQuery reads n named repositories, one aliased field each (r0…), their names in the
// variables n0….
func namedScanQuery(n int) string {
	var q strings.Builder
	q.WriteString("query($owner: String!, $base: String!, $bot: String!, $baseName: String!, $botName: String!")
	for i := range n {
		fmt.Fprintf(&q, ", $n%d: String!", i)
	}
	q.WriteString(") {\n")
	for i := range n {
		fmt.Fprintf(&q, "  r%d: repository(owner: $owner, name: $n%d) { %s }\n", i, i, repoFields)
	}
	q.WriteString("}")
	return q.String()
}
