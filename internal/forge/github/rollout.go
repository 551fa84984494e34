package github

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// rolloutFields is what a wave check reads of each cluster repository: the newest open or
// merged pull request from the bot branch, and its merge commit's statuses (Flux's
// notification-controller posts one per Kustomization on the commit it applied). Status's
// contexts are a list, not a connection: they add nothing to the query's cost.
var rolloutFields = `base: ref(qualifiedName: $base) { target { oid ... on Commit { status { contexts { context state createdAt } } } } }
      pullRequests(headRefName: $bot, states: [OPEN, MERGED], first: ` + strconv.Itoa(scanPRs) + `, orderBy: {field: UPDATED_AT, direction: DESC}) {
        nodes { number state body isCrossRepository mergedAt mergeCommit { oid status { state contexts { context state createdAt } } } }
      }`

type rolloutStatus struct {
	Contexts []struct {
		Context   string    `json:"context"`
		State     string    `json:"state"`
		CreatedAt time.Time `json:"createdAt"`
	} `json:"contexts"`
}

func (s *rolloutStatus) statuses() []pr.CommitStatus {
	if s == nil {
		return nil
	}
	out := make([]pr.CommitStatus, 0, len(s.Contexts))
	for _, c := range s.Contexts {
		out = append(out, pr.CommitStatus{Context: c.Context, State: strings.ToLower(c.State), CreatedAt: c.CreatedAt})
	}
	return out
}

type rolloutRepo struct {
	Base *struct {
		Target struct {
			OID    string         `json:"oid"`
			Status *rolloutStatus `json:"status"`
		} `json:"target"`
	} `json:"base"`
	PullRequests struct {
		Nodes []struct {
			Number            int        `json:"number"`
			State             string     `json:"state"`
			Body              string     `json:"body"`
			IsCrossRepository bool       `json:"isCrossRepository"`
			MergedAt          *time.Time `json:"mergedAt"`
			MergeCommit       *struct {
				OID    string         `json:"oid"`
				Status *rolloutStatus `json:"status"`
			} `json:"mergeCommit"`
		} `json:"nodes"`
	} `json:"pullRequests"`
}

func rolloutQuery(n int) string { return reposQuery(n, rolloutFields) }

// reposQuery is one GraphQL query reading fields of n repositories of $owner ($n0, $n1, ...),
// aliased r0, r1, ... (the rollout's pull requests, a rollback's merge history).
func reposQuery(n int, fields string) string {
	return reposQueryWith(n, "$base: String!, $bot: String!", fields)
}

// reposQueryWith is reposQuery with the query's own variables declared by decl ("" for none)
// besides $owner and the names.
func reposQueryWith(n int, decl, fields string) string {
	var q strings.Builder
	q.WriteString("query($owner: String!")
	if decl != "" {
		q.WriteString(", " + decl)
	}
	for i := range n {
		fmt.Fprintf(&q, ", $n%d: String!", i)
	}
	q.WriteString(") {\n")
	for i := range n {
		fmt.Fprintf(&q, "  r%d: repository(owner: $owner, name: $n%d) { %s }\n", i, i, fields)
	}
	q.WriteString("}")
	return q.String()
}

// RolloutPRs implements pr.RolloutReader: 100 repositories a GraphQL query, so a wave check
// over 1,000 clusters costs 10 requests. A repository that does not exist is absent.
//
// GitHub API docs: https://docs.github.com/graphql/reference/objects#pullrequest
func (f *Forge) RolloutPRs(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string]pr.RolloutPR, error) {
	out := map[string]pr.RolloutPR{}
	for start := 0; start < len(repos); start += scanPageSize {
		batch := repos[start:min(start+scanPageSize, len(repos))]
		vars := map[string]any{"owner": owner, "base": "refs/heads/" + defaultBranch, "bot": botBranch}
		for i, name := range batch {
			vars[fmt.Sprintf("n%d", i)] = name
		}
		data := map[string]*rolloutRepo{}
		if err := f.graphQL(ctx, rolloutQuery(len(batch)), vars, &data, "NOT_FOUND"); err != nil {
			return nil, fmt.Errorf("reading the pull requests and merge statuses of %d repos of %s: %w", len(batch), owner, err)
		}
		for i, name := range batch {
			r := data[fmt.Sprintf("r%d", i)]
			if r == nil {
				continue
			}
			for _, n := range r.PullRequests.Nodes {
				if n.IsCrossRepository || !pr.HasMarker(n.Body) {
					continue // a fork's branch of the same name, or not fleetbot's
				}
				p := pr.RolloutPR{Number: n.Number, State: strings.ToLower(n.State), Source: pr.SourceOf(n.Body), Tree: pr.TreeOf(n.Body), Waves: pr.WavesOf(n.Body)}
				p.RollbackOf, p.FailedTree = pr.RollbackOf(n.Body)
				if n.MergedAt != nil {
					p.MergedAt = *n.MergedAt
				}
				if c := n.MergeCommit; c != nil && p.State == pr.StateMerged {
					p.MergeCommit, p.Statuses = c.OID, c.Status.statuses()
					if b := r.Base; b != nil && b.Target.OID != c.OID {
						p.Head, p.HeadStatuses = b.Target.OID, b.Target.Status.statuses()
					}
				}
				out[name] = p
				break
			}
		}
	}
	return out, nil
}

// historyPageSize is how many repositories one merge-history query reads: each brings up to
// pr.HistoryDepth pull requests with their bodies, so fewer than a scan's 100.
const historyPageSize = 25

// historyFields is what a rollback reads of each repository: its newest merged pull requests
// from the bot branch into the default branch, each with its merge commit, that commit's tree
// and its statuses.
var historyFields = `pullRequests(headRefName: $bot, baseRefName: $base, states: [MERGED], first: ` + strconv.Itoa(pr.HistoryDepth) + `, orderBy: {field: CREATED_AT, direction: DESC}) {
        nodes { number body isCrossRepository mergedAt mergeCommit { oid tree { oid } status { contexts { context state createdAt } } } }
      }`

type historyRepo struct {
	PullRequests struct {
		Nodes []struct {
			Number            int        `json:"number"`
			Body              string     `json:"body"`
			IsCrossRepository bool       `json:"isCrossRepository"`
			MergedAt          *time.Time `json:"mergedAt"`
			MergeCommit       *struct {
				OID  string `json:"oid"`
				Tree struct {
					OID string `json:"oid"`
				} `json:"tree"`
				Status *rolloutStatus `json:"status"`
			} `json:"mergeCommit"`
		} `json:"nodes"`
	} `json:"pullRequests"`
}

func historyQuery(n int) string { return reposQuery(n, historyFields) }

// MergeHistory implements pr.Restorer: 25 repositories a GraphQL query, each with its
// pr.HistoryDepth newest merged pull requests from the bot branch, their merge commits' trees
// and statuses. A repository that does not exist is absent.
//
// GitHub API docs: https://docs.github.com/graphql/reference/objects#pullrequest,
// https://docs.github.com/graphql/reference/objects#commit (tree)
func (f *Forge) MergeHistory(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string][]pr.MergedPR, error) {
	out := map[string][]pr.MergedPR{}
	for start := 0; start < len(repos); start += historyPageSize {
		batch := repos[start:min(start+historyPageSize, len(repos))]
		vars := map[string]any{"owner": owner, "base": defaultBranch, "bot": botBranch}
		for i, name := range batch {
			vars[fmt.Sprintf("n%d", i)] = name
		}
		data := map[string]*historyRepo{}
		if err := f.graphQL(ctx, historyQuery(len(batch)), vars, &data, "NOT_FOUND"); err != nil {
			return nil, fmt.Errorf("reading the merged pull requests of %d repos of %s: %w", len(batch), owner, err)
		}
		for i, name := range batch {
			r := data[fmt.Sprintf("r%d", i)]
			if r == nil {
				continue
			}
			var merged []pr.MergedPR
			for _, n := range r.PullRequests.Nodes {
				if n.IsCrossRepository || !pr.HasMarker(n.Body) || n.MergeCommit == nil {
					continue
				}
				m := pr.MergedPR{Number: n.Number, Source: pr.SourceOf(n.Body), Tree: pr.TreeOf(n.Body),
					MergeCommit: n.MergeCommit.OID, MergeTree: n.MergeCommit.Tree.OID, Statuses: n.MergeCommit.Status.statuses()}
				m.RollbackOf, _ = pr.RollbackOf(n.Body)
				if n.MergedAt != nil {
					m.MergedAt = *n.MergedAt
				}
				merged = append(merged, m)
			}
			slices.Reverse(merged) // oldest first
			if len(merged) > 0 {
				out[name] = merged
			}
		}
	}
	return out, nil
}

// CommitTree implements pr.Restorer with the Git Data API: a commit whose tree is an existing
// tree of the repository, so nothing else is uploaded.
//
// GitHub API docs: https://docs.github.com/rest/git/commits#create-a-commit
func (f *Forge) CommitTree(ctx context.Context, owner, repo string, tc pr.TreeCommit) (pr.Commit, error) {
	in := &gh.Commit{Message: gh.String(tc.Message), Tree: &gh.Tree{SHA: gh.String(tc.Tree)}}
	if tc.Parent != "" {
		in.Parents = []*gh.Commit{{SHA: gh.String(tc.Parent)}}
	}
	c, _, err := f.api.Git.CreateCommit(ctx, owner, repo, in, nil)
	if err != nil {
		return pr.Commit{}, errf(err, "committing tree "+tc.Tree+" in", owner+"/"+repo)
	}
	out := pr.Commit{SHA: c.GetSHA(), Tree: c.GetTree().GetSHA(), Message: c.GetMessage()}
	if tc.Parent != "" {
		out.Parents = []string{tc.Parent}
	}
	return out, nil
}
