package githubtest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestPullRequestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "cluster-a", map[string]string{"README.md": "v1\n"})
	srv.Commit("acme", "cluster-a", "main", "base moves", map[string]string{"other.txt": "o\n"})
	srv.Commit("acme", "cluster-a", "fleetbot/sync", "seed", map[string]string{"README.md": "v1\n"}) // unrelated root
	c := srv.ClientWithToken(srv.InstallationToken("acme"))

	// make the bot branch a child of main instead
	main := srv.Branch("acme", "cluster-a", "main")
	_, _, err := c.Git.UpdateRef(ctx, "acme", "cluster-a", &github.Reference{Ref: github.String("refs/heads/fleetbot/sync"),
		Object: &github.GitObject{SHA: &main}}, true)
	require.NoError(t, err)
	srv.CommitAs("fleetbot[bot]", "acme", "cluster-a", "fleetbot/sync", "sync", map[string]string{"platform/x.yaml": "x\n"})

	pr, _, err := c.PullRequests.Create(ctx, "acme", "cluster-a", &github.NewPullRequest{
		Title: github.String("fleetbot: sync"), Head: github.String("acme:fleetbot/sync"), Base: github.String("main"),
		Body: github.String("body")})
	require.NoError(t, err)
	assert.Equal(t, 1, pr.GetNumber())
	assert.Equal(t, "open", pr.GetState())
	assert.Equal(t, srv.Branch("acme", "cluster-a", "fleetbot/sync"), pr.GetHead().GetSHA())

	_, _, err = c.PullRequests.Create(ctx, "acme", "cluster-a", &github.NewPullRequest{
		Title: github.String("again"), Head: github.String("fleetbot/sync"), Base: github.String("main")})
	require.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err))
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	require.Len(t, er.Errors, 1)
	assert.Equal(t, "A pull request already exists for acme:fleetbot/sync.", er.Errors[0].Message)

	list, _, err := c.PullRequests.List(ctx, "acme", "cluster-a", &github.PullRequestListOptions{Head: "acme:fleetbot/sync", State: "open"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, _, err = c.PullRequests.List(ctx, "acme", "cluster-a", &github.PullRequestListOptions{Head: "acme:other", State: "all"})
	require.NoError(t, err)
	assert.Empty(t, list)

	pr, _, err = c.PullRequests.Edit(ctx, "acme", "cluster-a", 1, &github.PullRequest{Title: github.String("new title")})
	require.NoError(t, err)
	assert.Equal(t, "new title", pr.GetTitle())

	_, _, err = c.Issues.CreateComment(ctx, "acme", "cluster-a", 1, &github.IssueComment{Body: github.String("hello")})
	require.NoError(t, err)
	// The documented body, {"labels": [...]} (go-github v62 sends a bare array).
	req, err := c.NewRequest("POST", "repos/acme/cluster-a/issues/1/labels", map[string][]string{"labels": {"fleetbot"}})
	require.NoError(t, err)
	var labels []*github.Label
	_, err = c.Do(ctx, req, &labels)
	require.NoError(t, err)
	require.Len(t, labels, 1)
	assert.Equal(t, []string{"hello"}, srv.Comments("acme", "cluster-a", 1))

	res, _, err := c.PullRequests.Merge(ctx, "acme", "cluster-a", 1, "", nil)
	require.NoError(t, err)
	assert.True(t, res.GetMerged())
	pr, _, err = c.PullRequests.Get(ctx, "acme", "cluster-a", 1)
	require.NoError(t, err)
	assert.True(t, pr.GetMerged())
	assert.Equal(t, "closed", pr.GetState())
	assert.Equal(t, res.GetSHA(), pr.GetMergeCommitSHA())
	assert.Equal(t, res.GetSHA(), srv.Branch("acme", "cluster-a", "main"))
	got, ok := srv.File("acme", "cluster-a", "main", "platform/x.yaml")
	assert.True(t, ok)
	assert.Equal(t, "x\n", got)
	_, ok = srv.File("acme", "cluster-a", "main", "other.txt")
	assert.True(t, ok, "the merge keeps the base's own changes")

	closed, _, err := c.PullRequests.List(ctx, "acme", "cluster-a", &github.PullRequestListOptions{State: "closed"})
	require.NoError(t, err)
	assert.Len(t, closed, 1)

	cmp, _, err := c.Repositories.CompareCommits(ctx, "acme", "cluster-a", "main", "fleetbot/sync", nil)
	require.NoError(t, err)
	assert.Equal(t, "behind", cmp.GetStatus())
	assert.Equal(t, 1, cmp.GetBehindBy())
}

func TestPushToBaseMergesPullRequestAndCloseOnDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	c := srv.Client()
	mk := func(branch string) int {
		main := srv.Branch("acme", "r", "main")
		_, _, err := c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/" + branch), Object: &github.GitObject{SHA: &main}})
		require.NoError(t, err)
		srv.Commit("acme", "r", branch, "change", map[string]string{branch: "x\n"})
		pr, _, err := c.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String(branch), Head: github.String(branch), Base: github.String("main")})
		require.NoError(t, err)
		return pr.GetNumber()
	}
	n1, n2 := mk("one"), mk("two")

	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.GitURL("acme", "r"), "w")
	w := filepath.Join(dir, "w")
	git(t, w, "fetch", "-q", "origin", "one")
	git(t, w, "merge", "-q", "--no-edit", "FETCH_HEAD")
	git(t, w, "push", "-q", "origin", "HEAD:main")
	git(t, w, "push", "-q", "origin", ":two")

	pr1, _, err := c.PullRequests.Get(ctx, "acme", "r", n1)
	require.NoError(t, err)
	assert.True(t, pr1.GetMerged(), "a push containing the head merges the pull request")
	pr2, _, err := c.PullRequests.Get(ctx, "acme", "r", n2)
	require.NoError(t, err)
	assert.Equal(t, "closed", pr2.GetState(), "deleting the head branch closes the pull request")
	assert.False(t, pr2.GetMerged())
}

func TestWebhooksDelivered(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	var mu sync.Mutex
	got := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := github.ValidatePayload(r, []byte(secret))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if _, err := github.ParseWebHook(github.WebHookType(r), payload); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[github.WebHookType(r)+":"+r.Header.Get("User-Agent")[:15]]++
		mu.Unlock()
	}))
	defer hook.Close()
	srv := githubtest.NewServer(t, githubtest.WithWebhook(hook.URL, secret))
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	srv.Commit("acme", "r", "b", "b", map[string]string{"b": "b\n"})
	_, _, err := srv.Client().PullRequests.Create(context.Background(), "acme", "r",
		&github.NewPullRequest{Title: github.String("t"), Head: github.String("b"), Base: github.String("main")})
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["pull_request:GitHub-Hookshot"] == 1 && got["push:GitHub-Hookshot"] == 2 && got["installation:GitHub-Hookshot"] == 1
	}, 5*time.Second, 10*time.Millisecond)

	// explicit delivery with a bad secret is rejected by the receiver
	ev, err := srv.PushEvent("acme", "r", "main", "")
	require.NoError(t, err)
	err = srv.Deliver(context.Background(), hook.URL, "wrong", "push", ev)
	assert.Error(t, err)
}

func TestGitPushAuth(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	resp, err := http.Get(srv.URL + "/acme/r.git/info/refs?service=git-upload-pack")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.GitURLWithToken("acme", "r", srv.InstallationToken("acme")), "w")
	_, err = os.Stat(filepath.Join(dir, "w", "a"))
	assert.NoError(t, err)
	var classes []githubtest.Class
	for _, e := range srv.Requests() {
		classes = append(classes, e.Class)
	}
	assert.NotContains(t, classes, githubtest.Write, "a clone only reads")
}
