package github

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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

func rolloutQuery(n int) string {
	var q strings.Builder
	q.WriteString("query($owner: String!, $base: String!, $bot: String!")
	for i := range n {
		fmt.Fprintf(&q, ", $n%d: String!", i)
	}
	q.WriteString(") {\n")
	for i := range n {
		fmt.Fprintf(&q, "  r%d: repository(owner: $owner, name: $n%d) { %s }\n", i, i, rolloutFields)
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
