package githubapi

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// tenantRepos are TenantRepos over the fake's installation on acme.
func tenantRepos(srv *githubtest.Server) *TenantRepos {
	return NewTenantRepos(func(_ context.Context, owner string, _ bool) (*gh.Client, error) {
		return srv.ClientWithToken(srv.InstallationToken(owner)), nil
	}, "")
}

// commitTree commits entries on top of branch main of acme/repo through the Git Data API and
// returns the commit.
func commitTree(t *testing.T, srv *githubtest.Server, repo string, entries []*gh.TreeEntry) string {
	t.Helper()
	ctx := context.Background()
	api := srv.Client()
	ref, _, err := api.Git.GetRef(ctx, "acme", repo, "heads/main")
	require.NoError(t, err)
	parent, _, err := api.Git.GetCommit(ctx, "acme", repo, ref.GetObject().GetSHA())
	require.NoError(t, err)
	tree, _, err := api.Git.CreateTree(ctx, "acme", repo, parent.GetTree().GetSHA(), entries)
	require.NoError(t, err)
	c, _, err := api.Git.CreateCommit(ctx, "acme", repo, &gh.Commit{Message: gh.String("change"), Tree: tree,
		Parents: []*gh.Commit{{SHA: parent.SHA}}}, nil)
	require.NoError(t, err)
	return c.GetSHA()
}

// TestTenantReposReadsTheHeadAsACheckoutHoldsIt: the files of a commit are its regular files,
// executable or not, by path; symlinks and submodules are not read (a checkout's symlinks are
// not followed by check workspace either); a blob read once is not read again by the next check.
func TestTenantReposReadsTheHeadAsACheckoutHoldsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "workspace-payments", map[string]string{"apps/kustomization.yaml": "resources: []\n", "README.md": "hi\n"})
	sha := commitTree(t, srv, "workspace-payments", []*gh.TreeEntry{
		{Path: gh.String("apps/secret.yaml"), Mode: gh.String("120000"), Type: gh.String("blob"), Content: gh.String("/etc/passwd")},
		{Path: gh.String("bin/run.sh"), Mode: gh.String("100755"), Type: gh.String("blob"), Content: gh.String("#!/bin/sh\n")},
	})
	tr := tenantRepos(srv)
	srv.ResetLog()
	files, err := tr.Files(ctx, "acme/workspace-payments", sha, nil)
	require.NoError(t, err)
	got := map[string]string{}
	for p, b := range files {
		got[p] = string(b)
	}
	assert.Equal(t, map[string]string{"apps/kustomization.yaml": "resources: []\n", "README.md": "hi\n", "bin/run.sh": "#!/bin/sh\n"}, got)
	blobs := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Route == "GET /repos/{owner}/{repo}/git/blobs/{sha}" {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 3, blobs(), "one read per file, none for the symlink")

	next := commitTree(t, srv, "workspace-payments", []*gh.TreeEntry{{Path: gh.String("apps/web.yaml"), Mode: gh.String("100644"), Type: gh.String("blob"), Content: gh.String("kind: x\n")}})
	srv.ResetLog()
	files, err = tr.Files(ctx, "acme/workspace-payments", next, nil)
	require.NoError(t, err)
	assert.Len(t, files, 3, "the second commit is on main, beside the first")
	assert.Equal(t, 1, blobs(), "the next push reads what it changed only")

	for _, bad := range []string{"main", strings.Repeat("z", 40), ""} {
		_, err := tr.Files(ctx, "acme/workspace-payments", bad, nil)
		assert.ErrorContains(t, err, "is not a commit SHA", bad)
	}
	_, err = tr.Files(ctx, "acme", sha, nil)
	assert.ErrorContains(t, err, "want owner/name")

	// What fleetbot rendered is not read: here, a fresh TenantRepos that knows the files' content.
	rendered := map[string][]byte{}
	for _, c := range []string{"resources: []\n", "hi\n", "kind: x\n"} {
		rendered[gitBlobHash(c)] = []byte(c)
	}
	srv.ResetLog()
	files, err = tenantRepos(srv).Files(ctx, "acme/workspace-payments", next, rendered)
	require.NoError(t, err)
	assert.Len(t, files, 3)
	assert.Zero(t, blobs(), "every file was rendered by fleetbot")
}

// TestTenantBlobsRefusesWhatACheckoutCannotHold: a tree entry whose path is not a plain path
// inside the repo (.., absolute, empty elements, a .git directory) refuses the whole read before
// any blob is read, as do files beyond the bounds; the errors say what and what to do.
func TestTenantBlobsRefusesWhatACheckoutCannotHold(t *testing.T) {
	t.Parallel()
	blob := func(p string, size int) *gh.TreeEntry {
		return &gh.TreeEntry{Path: gh.String(p), Mode: gh.String("100644"), Type: gh.String("blob"), Size: gh.Int(size), SHA: gh.String(strings.Repeat("a", 40))}
	}
	for _, p := range []string{"../escape.yaml", "apps/../../escape.yaml", "/etc/passwd", "apps//x.yaml", "apps/./x.yaml", ".git/config",
		"apps/.GIT/hooks/x", "apps\\..\\x", "", "."} {
		_, err := tenantBlobs("acme/w", "abc", []*gh.TreeEntry{blob("apps/ok.yaml", 1), blob(p, 1)})
		require.ErrorIs(t, err, ErrTenantRepo, "%q", p)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", p))
	}
	many := make([]*gh.TreeEntry, 0, MaxTenantFiles+1)
	for i := range MaxTenantFiles + 1 {
		many = append(many, blob(fmt.Sprintf("apps/%d.yaml", i), 1))
	}
	_, err := tenantBlobs("acme/w", "abc", many)
	require.ErrorIs(t, err, ErrTenantRepo)
	assert.Contains(t, err.Error(), "more than 1000 files")
	assert.Contains(t, err.Error(), tenantHint)
	_, err = tenantBlobs("acme/w", "abc", many[:MaxTenantFiles])
	assert.NoError(t, err, "the bound itself is allowed")

	_, err = tenantBlobs("acme/w", "abc", []*gh.TreeEntry{blob("big.bin", control.MaxFileBytes+1)})
	require.ErrorIs(t, err, ErrTenantRepo)
	assert.Contains(t, err.Error(), "big.bin")
	var large []*gh.TreeEntry
	for i := range 5 {
		large = append(large, blob(fmt.Sprintf("f%d", i), control.MaxFileBytes))
	}
	_, err = tenantBlobs("acme/w", "abc", large)
	require.ErrorIs(t, err, ErrTenantRepo)
	assert.Contains(t, err.Error(), "more than 16777216 bytes")

	// Directories, symlinks and submodules are neither read nor counted.
	got, err := tenantBlobs("acme/w", "abc", []*gh.TreeEntry{
		{Path: gh.String("apps"), Mode: gh.String("040000"), Type: gh.String("tree")},
		{Path: gh.String("link"), Mode: gh.String("120000"), Type: gh.String("blob"), Size: gh.Int(control.MaxFileBytes + 1)},
		{Path: gh.String("vendor/lib"), Mode: gh.String("160000"), Type: gh.String("commit")},
		blob("apps/a.yaml", 3),
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "apps/a.yaml", got[0].GetPath())
}

// TestTenantCheckRunCarriesEveryAnnotation: a check run with more annotations than GitHub takes
// in one request is written 50 at a time, completed by the last request only; its summary is
// cut to GitHub's limit in bytes, whole characters only, and an annotation's title and message
// to theirs.
func TestTenantCheckRunCarriesEveryAnnotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "cluster-a", map[string]string{"apps/kustomization.yaml": "resources: []\n"})
	head := srv.Branch("acme", "cluster-a", "main")
	tr := tenantRepos(srv)
	id, err := tr.Start(ctx, "acme/cluster-a", head)
	require.NoError(t, err)

	var anns []checkrun.Annotation
	for i := range 120 {
		anns = append(anns, checkrun.Annotation{Path: "apps/kustomization.yaml", Line: i, Level: "failure",
			Message: fmt.Sprintf("problem %d ", i) + strings.Repeat("é", 40000), Title: strings.Repeat("t", 300)})
	}
	srv.ResetLog()
	res := checkrun.Result{Conclusion: checkrun.ConclusionFailure, Title: "120 problem(s)", Summary: strings.Repeat("❌ problem\n", 10000), Annotations: anns}
	require.NoError(t, tr.Finish(ctx, "acme/cluster-a", id, res))
	var patches int
	for _, r := range srv.Requests() {
		if r.Route == "PATCH /repos/{owner}/{repo}/check-runs/{id}" {
			patches++
		}
	}
	assert.Equal(t, 3, patches, "120 annotations in requests of 50")
	got, err := srv.CheckRunAnnotations(id)
	require.NoError(t, err)
	require.Len(t, got, 120, "GitHub appends each request's annotations")
	for i, a := range got {
		assert.True(t, strings.HasPrefix(a.GetMessage(), fmt.Sprintf("problem %d ", i)), "in order")
	}

	runs, _, err := srv.Client().Checks.ListCheckRunsForRef(ctx, "acme", "cluster-a", head, nil)
	require.NoError(t, err)
	require.Len(t, runs.CheckRuns, 1)
	cr := runs.CheckRuns[0]
	assert.Equal(t, 120, cr.GetOutput().GetAnnotationsCount())
	assert.Equal(t, checkrun.DefaultTenantCheckName, cr.GetName())
	assert.Equal(t, "completed", cr.GetStatus())
	assert.Equal(t, "failure", cr.GetConclusion())
	sum := cr.GetOutput().GetSummary()
	assert.LessOrEqual(t, len(sum), checkrun.MaxCheckText)
	assert.True(t, utf8.ValidString(sum))
	assert.Contains(t, sum, "truncated")

	// Each request's annotations within GitHub's limits.
	out := checkOutput(res, anns[:1])
	a := out.Annotations[0]
	assert.Equal(t, 1, a.GetStartLine(), "line 0 (a file-level problem) is line 1")
	assert.LessOrEqual(t, len(a.GetMessage()), checkrun.MaxAnnotationMessage)
	assert.True(t, utf8.ValidString(a.GetMessage()))
	assert.Equal(t, checkrun.MaxAnnotationTitle, utf8.RuneCountInString(a.GetTitle()), "255 characters")
}

// TestTenantCheckRunWithoutChecksWrite: an installation without checks: write is refused the
// check run, and the error says which permission to accept.
func TestTenantCheckRunWithoutChecksWrite(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t, githubtest.WithAppPermissions(map[string]string{"metadata": "read", "contents": "read"}))
	srv.CreateRepo("acme", "cluster-a", map[string]string{"apps/kustomization.yaml": "resources: []\n"})
	_, err := tenantRepos(srv).Start(context.Background(), "acme/cluster-a", srv.Branch("acme", "cluster-a", "main"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs the checks: write permission that app.yml lists")
}

// gitBlobHash is git's blob hash of content (git hash-object).
func gitBlobHash(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00%s", len(content), content)
	return hex.EncodeToString(h.Sum(nil))
}
