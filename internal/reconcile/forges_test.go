package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// harness drives one forge through the lifecycle scenario: what a human
// does by hand, and how to observe the forge without going through it.
type harness struct {
	forge Forge
	// merge merges PR n of repo by hand, in one of four ways (i%4).
	merge func(t *testing.T, repo string, n, way int)
	// humanCommit commits files to branch as a human and returns the SHA.
	humanCommit func(t *testing.T, repo, branch string, files map[string]string) string
	refs        func(t *testing.T, repo string) map[string]string
	pulls       func(t *testing.T, repo string) []*pr.PullRequest
	comments    func(t *testing.T, repo string, n int) []string
	// quiet starts counting; wrote reports whether anything was written
	// since, and checks the per-repo read cost of a no-op.
	quiet func(t *testing.T)
	wrote func(t *testing.T, repos int) bool
}

func localHarness(t *testing.T) *harness {
	requireGit(t)
	dir := t.TempDir()
	f := openForge(t, dir)
	var before map[string]string
	return &harness{
		forge: f,
		merge: func(t *testing.T, repo string, n, way int) {
			switch way % 4 {
			case 0:
				require.NoError(t, f.Merge(context.Background(), "acme", repo, n, local.MergeFastForward))
			case 1:
				require.NoError(t, f.Merge(context.Background(), "acme", repo, n, local.MergeCommit))
			case 2:
				require.NoError(t, f.Merge(context.Background(), "acme", repo, n, local.MergeSquash))
			case 3:
				gitUpdateRef(t, dir, repo, "refs/heads/main", "refs/heads/fleetbot/sync")
			}
		},
		humanCommit: func(t *testing.T, repo, branch string, files map[string]string) string {
			return humanPush(t, dir, repo, branch, func(wt string) {
				for p, c := range files {
					writeFile(t, wt, p, c)
				}
			})
		},
		refs: func(t *testing.T, repo string) map[string]string {
			r, err := f.Refs("acme", repo)
			require.NoError(t, err)
			return r
		},
		pulls: func(t *testing.T, repo string) []*pr.PullRequest {
			ps, err := f.PullRequests("acme", repo)
			require.NoError(t, err)
			return ps
		},
		comments: func(t *testing.T, repo string, n int) []string {
			cs, err := f.Comments("acme", repo, n)
			require.NoError(t, err)
			return cs
		},
		quiet: func(t *testing.T) { before = dirState(t, dir) },
		wrote: func(t *testing.T, _ int) bool {
			return fmt.Sprint(before) != fmt.Sprint(dirState(t, dir))
		},
	}
}

// githubHarness runs the forge as a GitHub App installed on acme, against
// the fake GitHub through the real go-github client and transport chain.
func githubHarness(t *testing.T, fl fleet) (*harness, *githubtest.Server) {
	srv := githubtest.NewServer(t)
	srv.CreateTeam("acme", "platform")
	for _, n := range fl.names() {
		srv.CreateTeam("acme", n+"-admins")
	}
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme",
		// The lifecycle is about behaviour; budget waits are tested in forge/github.
		Budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1},
	})
	require.NoError(t, err)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: filepath.Join(t.TempDir(), "cache")})
	human := srv.Client()
	ctx := context.Background()
	return &harness{
		forge: f,
		merge: func(t *testing.T, repo string, n, way int) {
			switch way % 4 {
			case 0, 1, 2:
				method := []string{"rebase", "merge", "squash"}[way%4]
				_, _, err := human.PullRequests.Merge(ctx, "acme", repo, n, "", &gh.PullRequestOptions{MergeMethod: method})
				require.NoError(t, err, repo)
			case 3: // fast-forward main to the bot branch with a push
				bot := srv.Branch("acme", repo, "fleetbot/sync")
				_, _, err := human.Git.UpdateRef(ctx, "acme", repo, &gh.Reference{Ref: gh.String("refs/heads/main"), Object: &gh.GitObject{SHA: gh.String(bot)}}, false)
				require.NoError(t, err, repo)
			}
		},
		humanCommit: func(t *testing.T, repo, branch string, files map[string]string) string {
			return srv.Commit("acme", repo, branch, "human edit", files)
		},
		refs: func(t *testing.T, repo string) map[string]string {
			refs, _, err := human.Git.ListMatchingRefs(ctx, "acme", repo, &gh.ReferenceListOptions{Ref: "heads/"})
			require.NoError(t, err)
			out := map[string]string{}
			for _, r := range refs {
				out[strings.TrimPrefix(r.GetRef(), "refs/heads/")] = r.GetObject().GetSHA()
			}
			return out
		},
		pulls: func(t *testing.T, repo string) []*pr.PullRequest {
			var out []*pr.PullRequest
			for _, p := range srv.Pulls("acme", repo) {
				state := p.GetState()
				if p.GetMerged() {
					state = pr.StateMerged
				}
				out = append(out, &pr.PullRequest{Number: p.GetNumber(), State: state, Title: p.GetTitle(), Body: p.GetBody()})
			}
			return out
		},
		comments: func(t *testing.T, repo string, n int) []string { return srv.Comments("acme", repo, n) },
		quiet:    func(t *testing.T) { srv.ResetLog() },
		wrote: func(t *testing.T, repos int) bool {
			n := srv.Counts()
			// Per run, not per repo: a page of the org's repos (ListManaged, and
			// Org as a 304), a page of its teams (Org); everything else is per repo.
			assert.LessOrEqual(t, n.Reads, repos+3, "a no-op costs at most one read per repo")
			return n.Writes > 0
		},
	}, srv
}

// TestLifecycleBothForges runs one lifecycle scenario on the local forge
// and on the GitHub forge (fake GitHub, real go-github client): first
// apply, merges by hand, no-op, a change, base moved, revert, a human
// commit on the bot branch, one removal.
func TestLifecycleBothForges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    func(t *testing.T, fl fleet) *harness
	}{
		{"local", func(t *testing.T, _ fleet) *harness { return localHarness(t) }},
		{"github", func(t *testing.T, fl fleet) *harness { h, _ := githubHarness(t, fl); return h }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := tenClusters()
			h := tc.h(t, fl)
			all := repoNames(fl)

			// 1. First apply: create every repo and open its first PR.
			rep, err := apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			for _, r := range rep.Results {
				assert.Equal(t, pr.ActionCreate, r.Action, r.Repo)
				assert.Equal(t, 1, r.PR, r.Repo)
			}
			ps := h.pulls(t, "cluster-c01")
			require.Len(t, ps, 1)
			assert.Equal(t, pr.StateOpen, ps[0].State)
			assert.Equal(t, "fleetbot: sync cluster c01", ps[0].Title)

			// 2. Merge by hand; the merges are recognised and the branch deleted.
			for i, repo := range all {
				h.merge(t, repo, 1, i)
			}
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			for _, r := range rep.Results {
				assert.Equal(t, pr.ActionCleanup, r.Action, r.Repo)
			}
			for _, repo := range all {
				assert.Equal(t, pr.StateMerged, h.pulls(t, repo)[0].State, repo)
				assert.NotContains(t, h.refs(t, repo), "fleetbot/sync", repo)
			}

			// 3. No-op: zero writes, at most one read per repo.
			h.quiet(t)
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.False(t, rep.Changed())
			assert.False(t, h.wrote(t, len(all)), "a no-op writes nothing")

			// 4. A change to one cluster opens one PR.
			fl["c03"] = "v2"
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			for repo, a := range actions(rep) {
				want := string(pr.ActionNoop)
				if repo == "cluster-c03" {
					want = string(pr.ActionOpen)
				}
				assert.Equal(t, want, a, repo)
			}
			assert.Equal(t, 2, byRepo(rep)["cluster-c03"].PR)

			// 4b. Main moves under an open PR: rebuilt in place.
			fl["c04"] = "v2"
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, string(pr.ActionOpen), actions(rep)["cluster-c04"])
			newMain := h.humanCommit(t, "cluster-c04", "main", map[string]string{"apps/team.yaml": "kind: ConfigMap\n"})
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, string(pr.ActionUpdate), actions(rep)["cluster-c04"])
			assert.Equal(t, 2, byRepo(rep)["cluster-c04"].PR, "same PR, updated in place")
			snap, err := h.forge.Snapshot(context.Background(), "acme", "cluster-c04", "main", "fleetbot/sync")
			require.NoError(t, err)
			assert.Equal(t, []string{newMain}, snap.Bot.Parents, "bot commit rebuilt on the moved main")

			// 4c. Revert: the PR is closed with a comment, its branch deleted.
			fl["c04"] = "v1"
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, string(pr.ActionClose), actions(rep)["cluster-c04"])
			assert.Equal(t, pr.StateClosed, pullN(t, h, "cluster-c04", 2).State)
			cs := h.comments(t, "cluster-c04", 2)
			require.Len(t, cs, 1)
			assert.Contains(t, cs[0], "already matches")
			assert.NotContains(t, h.refs(t, "cluster-c04"), "fleetbot/sync")

			// 5. A human commit on the bot branch is left alone, said once.
			human := h.humanCommit(t, "cluster-c03", "fleetbot/sync", map[string]string{"platform/monitoring.yaml": "# by hand\n"})
			fl["c03"] = "v3"
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, string(pr.ActionBlocked), actions(rep)["cluster-c03"])
			assert.Equal(t, human, h.refs(t, "cluster-c03")["fleetbot/sync"], "human commit never overwritten")
			h.quiet(t)
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, string(pr.ActionBlocked), actions(rep)["cluster-c03"])
			assert.False(t, h.wrote(t, len(all)), "blocked is reported once, then nothing is written")
			assert.Len(t, h.comments(t, "cluster-c03", 2), 1, "said once on the PR")

			// 7. Remove one cluster: a PR removes its managed content.
			delete(fl, "c10")
			rep, err = apply(t, h.forge, fl, Options{})
			require.NoError(t, err)
			assert.Equal(t, pr.ActionRemove, byRepo(rep)["cluster-c10"].Action)
			ps = h.pulls(t, "cluster-c10")
			assert.Equal(t, "fleetbot: remove cluster c10", ps[len(ps)-1].Title)
		})
	}
}

func pullN(t *testing.T, h *harness, repo string, n int) *pr.PullRequest {
	t.Helper()
	for _, p := range h.pulls(t, repo) {
		if p.Number == n {
			return p
		}
	}
	require.Failf(t, "no such pull request", "%s #%d", repo, n)
	return nil
}
