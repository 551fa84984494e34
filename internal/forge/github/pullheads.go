package github

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The reads of a resync's recovery of tenant checks (serve): the open pull requests of many
// repositories, and fleetbot's newest check run of a name on each head, batched in GraphQL
// queries of 100 repositories or heads, so that a resync over 1,000 repos costs about ten
// requests plus ten for the heads it has not seen completed yet.

// PullHead is an open pull request of a repository of the queried owner and its head commit.
type PullHead struct {
	// Repo is the repository's name (without its owner).
	Repo   string
	Number int
	Head   string
}

// CheckRunState is a check run as a resync judges it: id, status (lowercase, as in REST:
// queued, in_progress, completed, ...) and when it started.
type CheckRunState struct {
	ID        int64
	Status    string
	StartedAt time.Time
}

// openPullsFields reads a repository's open pull requests (at most 100: a workspace or cluster
// repo has a few) with their head commits. A fork's pull request is read too: the branch
// protection of the base requires the check on every head.
var openPullsFields = `pullRequests(states: [OPEN], first: 100) { nodes { number headRefOid } }`

type openPullsRepo struct {
	PullRequests struct {
		Nodes []struct {
			Number     int    `json:"number"`
			HeadRefOID string `json:"headRefOid"`
		} `json:"nodes"`
	} `json:"pullRequests"`
}

// OpenPullHeads returns the open pull requests of owner's repos (names), 100 repositories a
// GraphQL query. A repository that does not exist has none.
//
// GitHub API docs: https://docs.github.com/graphql/reference/objects#repository (pullRequests)
func (f *Forge) OpenPullHeads(ctx context.Context, owner string, repos []string) ([]PullHead, error) {
	var out []PullHead
	for start := 0; start < len(repos); start += scanPageSize {
		batch := repos[start:min(start+scanPageSize, len(repos))]
		vars := map[string]any{"owner": owner}
		for i, name := range batch {
			vars[fmt.Sprintf("n%d", i)] = name
		}
		data := map[string]*openPullsRepo{}
		if err := f.graphQL(ctx, reposQueryWith(len(batch), "", openPullsFields), vars, &data, "NOT_FOUND"); err != nil {
			return out, fmt.Errorf("reading the open pull requests of %d repos of %s: %w", len(batch), owner, err)
		}
		for i, name := range batch {
			if r := data[fmt.Sprintf("r%d", i)]; r != nil {
				for _, n := range r.PullRequests.Nodes {
					out = append(out, PullHead{Repo: name, Number: n.Number, Head: n.HeadRefOID})
				}
			}
		}
	}
	return out, nil
}

// headsQuery reads, for n heads ($n0/$o0, ...: repository name and commit id), the newest check
// run named $check in the check suite of the App $app (null: any App's suites) on the commit.
func headsQuery(n int) string {
	var q strings.Builder
	q.WriteString("query($owner: String!, $app: Int, $check: String!")
	for i := range n {
		fmt.Fprintf(&q, ", $n%d: String!, $o%d: GitObjectID!", i, i)
	}
	q.WriteString(") {\n")
	for i := range n {
		fmt.Fprintf(&q, "  r%d: repository(owner: $owner, name: $n%d) { object(oid: $o%d) { ... on Commit { "+
			"checkSuites(first: 10, filterBy: {appId: $app, checkName: $check}) { nodes { "+
			"checkRuns(first: 1, filterBy: {checkName: $check, checkType: LATEST}) { nodes { databaseId status startedAt } } } } } } }\n", i, i, i)
	}
	q.WriteString("}")
	return q.String()
}

type headsRepo struct {
	Object *struct {
		CheckSuites struct {
			Nodes []struct {
				CheckRuns struct {
					Nodes []struct {
						DatabaseID int64      `json:"databaseId"`
						Status     string     `json:"status"`
						StartedAt  *time.Time `json:"startedAt"`
					} `json:"nodes"`
				} `json:"checkRuns"`
			} `json:"nodes"`
		} `json:"checkSuites"`
	} `json:"object"`
}

// LatestCheckRuns returns the newest check run named name of the GitHub App appID (0: any App)
// on each head of owner's repos, 100 heads a GraphQL query; a head without one is absent.
//
// GitHub API docs: https://docs.github.com/graphql/reference/objects#commit (checkSuites),
// https://docs.github.com/graphql/reference/objects#checksuite (checkRuns)
func (f *Forge) LatestCheckRuns(ctx context.Context, owner string, heads []PullHead, name string, appID int64) (map[PullHead]CheckRunState, error) {
	out := map[PullHead]CheckRunState{}
	for start := 0; start < len(heads); start += scanPageSize {
		batch := heads[start:min(start+scanPageSize, len(heads))]
		vars := map[string]any{"owner": owner, "check": name, "app": nil}
		if appID != 0 {
			vars["app"] = appID
		}
		for i, h := range batch {
			vars["n"+strconv.Itoa(i)], vars["o"+strconv.Itoa(i)] = h.Repo, h.Head
		}
		data := map[string]*headsRepo{}
		if err := f.graphQL(ctx, headsQuery(len(batch)), vars, &data, "NOT_FOUND"); err != nil {
			return out, fmt.Errorf("reading the %s check runs of %d pull request heads of %s: %w", name, len(batch), owner, err)
		}
		for i, h := range batch {
			r := data["r"+strconv.Itoa(i)]
			if r == nil || r.Object == nil {
				continue
			}
			var newest CheckRunState
			for _, s := range r.Object.CheckSuites.Nodes {
				for _, cr := range s.CheckRuns.Nodes {
					if cr.DatabaseID > newest.ID {
						newest = CheckRunState{ID: cr.DatabaseID, Status: strings.ToLower(cr.Status)}
						if cr.StartedAt != nil {
							newest.StartedAt = *cr.StartedAt
						}
					}
				}
			}
			if newest.ID != 0 {
				out[h] = newest
			}
		}
	}
	return out, nil
}
