package local

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

func fixedClock() func() time.Time {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { return t0 }
}

func open(t *testing.T, dir string) *Forge {
	t.Helper()
	f, err := Open(dir, Options{Now: fixedClock(), LockTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// seed creates acme/r with one commit on main holding files.
func seed(t *testing.T, f *Forge, files map[string]string) pr.Commit {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.CreateRepo(ctx, pr.RepoSpec{Owner: "acme", Repo: "r", Kind: "cluster", Name: "x", DefaultBranch: "main",
		Access: policy.Access{Teams: map[string]policy.Role{"platform": policy.RoleAdmin}}}))
	var ch []pr.Change
	for p, c := range files {
		ch = append(ch, pr.Change{Path: p, Content: []byte(c)})
	}
	c, err := f.Commit(ctx, "acme", "r", pr.NewCommit{Changes: ch, Message: "init\n"})
	require.NoError(t, err)
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "main", c.SHA, ""))
	return c
}

func TestCreateCommitSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	f := open(t, dir)

	s, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.False(t, s.Exists)

	c := seed(t, f, map[string]string{"README.md": "hi\n", "apps/kustomization.yaml": "resources: []\n"})
	l := gittree.Listing{
		"README.md":               {Mode: gittree.ModeFile, Hash: gittree.BlobHash([]byte("hi\n"))},
		"apps/kustomization.yaml": {Mode: gittree.ModeFile, Hash: gittree.BlobHash([]byte("resources: []\n"))},
	}
	want, err := gittree.Hash(l)
	require.NoError(t, err)
	assert.Equal(t, want, c.Tree, "forge tree == locally computed tree")

	s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	require.True(t, s.Exists)
	require.NotNil(t, s.Base)
	assert.Equal(t, c.SHA, s.Base.SHA)
	assert.Equal(t, l, s.Files)
	assert.Nil(t, s.Bot)
	assert.Nil(t, s.PR)

	// A second commit deleting and changing, on a branch.
	c2, err := f.Commit(ctx, "acme", "r", pr.NewCommit{Parent: c.SHA, BaseTree: c.Tree, Message: "two\n", Changes: []pr.Change{
		{Path: "README.md", Delete: true}, {Path: "platform/a.yaml", Content: []byte("kind: A\n")},
	}})
	require.NoError(t, err)
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", c2.SHA, ""))
	got, err := f.Blob(ctx, "acme", "r", gittree.BlobHash([]byte("kind: A\n")))
	require.NoError(t, err)
	assert.Equal(t, "kind: A\n", string(got))

	// Plain git reads what go-git wrote.
	if _, err := exec.LookPath("git"); err == nil {
		out, err := exec.Command("git", "--git-dir", filepath.Join(dir, "acme", "r.git"), "log", "--format=%H %cn <%ce>", "fleetbot/sync").CombinedOutput()
		require.NoError(t, err, string(out))
		assert.Equal(t, c2.SHA+" fleetbot <fleetbot@users.noreply.local>\n"+c.SHA+" fleetbot <fleetbot@users.noreply.local>\n", string(out))
		out, err = exec.Command("git", "--git-dir", filepath.Join(dir, "acme", "r.git"), "fsck", "--strict").CombinedOutput()
		require.NoError(t, err, string(out))
	}

	// A move names the head it replaces.
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "main", c2.SHA, c.SHA))
	err = f.SetBranch(ctx, "acme", "r", "main", c.SHA, c.SHA)
	assert.ErrorIs(t, err, pr.ErrRefMoved)

	a, err := f.Access(ctx, "acme", "r", policy.Access{})
	require.NoError(t, err)
	assert.Equal(t, policy.RoleAdmin, a.Teams["platform"])
	m, err := f.ListManaged(ctx, "acme")
	require.NoError(t, err)
	assert.Equal(t, []pr.ManagedRepo{{Kind: "cluster", Name: "x", Repo: "r"}}, m)
}

func TestPullRequestsAndMergeDetection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, method := range []MergeMethod{MergeFastForward, MergeCommit, MergeSquash, "plain-git"} {
		t.Run(string(method), func(t *testing.T) {
			dir := t.TempDir()
			f := open(t, dir)
			base := seed(t, f, map[string]string{"README.md": "hi\n"})
			c, err := f.Commit(ctx, "acme", "r", pr.NewCommit{Parent: base.SHA, BaseTree: base.Tree, Message: "x\n",
				Changes: []pr.Change{{Path: "platform/a.yaml", Content: []byte("a: 1\n")}}})
			require.NoError(t, err)
			require.NoError(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", c.SHA, ""))
			p, err := f.OpenPR(ctx, "acme", "r", pr.NewPR{Head: "fleetbot/sync", Base: "main", Title: "t", Body: "b"})
			require.NoError(t, err)
			assert.Equal(t, 1, p.Number)
			_, err = f.OpenPR(ctx, "acme", "r", pr.NewPR{Head: "fleetbot/sync", Base: "main", Title: "t", Body: "b"})
			assert.Error(t, err, "a second open PR for the same head")
			assert.ErrorIs(t, f.DeleteBranch(ctx, "acme", "r", "fleetbot/sync", c.SHA), ErrBranchHasOpenPR)

			s, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
			require.NoError(t, err)
			require.NotNil(t, s.PR)
			assert.Equal(t, pr.StateOpen, s.PR.State)

			if method == "plain-git" {
				if _, err := exec.LookPath("git"); err != nil {
					t.Skip("git CLI not installed")
				}
				out, err := exec.Command("git", "--git-dir", filepath.Join(dir, "acme", "r.git"), "update-ref", "refs/heads/main", "refs/heads/fleetbot/sync").CombinedOutput()
				require.NoError(t, err, string(out))
				s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
				require.NoError(t, err)
				assert.Equal(t, pr.StateMerged, s.PR.State)
				assert.True(t, s.PR.Inferred)
				require.NoError(t, f.RecordMerged(ctx, "acme", "r", 1))
			} else {
				require.NoError(t, f.Merge(ctx, "acme", "r", 1, method))
			}
			s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
			require.NoError(t, err)
			assert.Equal(t, pr.StateMerged, s.PR.State)
			assert.False(t, s.PR.Inferred)
			assert.Equal(t, c.Tree, s.Base.Tree)
			assert.Equal(t, c.SHA, s.PR.HeadSHA)
			require.NoError(t, f.DeleteBranch(ctx, "acme", "r", "fleetbot/sync", c.SHA))
		})
	}
}

// TestBranchMovesAreCompareAndSwap: every move of a branch names the head it replaces. A
// commit someone pushed after fleetbot read the branch is never overwritten or deleted: the
// move is refused with pr.ErrRefMoved and the branch keeps the commit; a branch created
// meanwhile is not taken over either. A repeated move to where the branch already is succeeds.
func TestBranchMovesAreCompareAndSwap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := open(t, t.TempDir())
	base := seed(t, f, map[string]string{"README.md": "hi\n"})
	commit := func(msg, content string) pr.Commit {
		c, err := f.Commit(ctx, "acme", "r", pr.NewCommit{Parent: base.SHA, BaseTree: base.Tree, Message: msg + "\n",
			Changes: []pr.Change{{Path: "platform/a.yaml", Content: []byte(content)}}})
		require.NoError(t, err)
		return c
	}
	bot := commit("bot", "a: 1\n")
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", bot.SHA, ""))
	read, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)

	// A person pushes to the bot branch after fleetbot's snapshot...
	human := commit("human", "a: 2\n")
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", human.SHA, bot.SHA))
	// ...then fleetbot moves it from the head it read: refused, nothing lost.
	next := commit("bot again", "a: 3\n")
	err = f.SetBranch(ctx, "acme", "r", "fleetbot/sync", next.SHA, read.Bot.SHA)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	assert.Contains(t, err.Error(), "acme/r: branch fleetbot/sync is at "+human.SHA[:7]+", not at "+bot.SHA[:7])
	assert.Equal(t, report.ClassRetryable, report.ClassOf(err).Class)
	assert.Equal(t, report.ReasonRefMoved, report.ClassOf(err).Reason)
	err = f.DeleteBranch(ctx, "acme", "r", "fleetbot/sync", read.Bot.SHA)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	refs, err := f.Refs("acme", "r")
	require.NoError(t, err)
	assert.Equal(t, human.SHA, refs["fleetbot/sync"], "the human commit is kept")

	// Creating names that the branch must not exist.
	require.ErrorIs(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", next.SHA, ""), pr.ErrRefMoved)
	// A repeated move to where the branch is (an answer lost) is no error.
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "fleetbot/sync", human.SHA, bot.SHA))
	// Deleting a branch already gone is no error.
	require.NoError(t, f.DeleteBranch(ctx, "acme", "r", "fleetbot/sync", human.SHA))
	require.NoError(t, f.DeleteBranch(ctx, "acme", "r", "fleetbot/sync", human.SHA))
}

func TestCorruptPullsIsNeverOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	f := open(t, dir)
	seed(t, f, map[string]string{"README.md": "hi\n"})
	name := filepath.Join(dir, "acme", "r.pulls.json")
	garbage := []byte(`[{"number": 1, "state": "open",`)
	require.NoError(t, os.WriteFile(name, garbage, 0o644))

	_, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrCorruptPulls)
	assert.Contains(t, err.Error(), name, "error names the file")
	_, err = f.OpenPR(ctx, "acme", "r", pr.NewPR{Head: "main", Base: "main"})
	assert.ErrorIs(t, err, ErrCorruptPulls)
	assert.Error(t, f.Comment(ctx, "acme", "r", 1, "x"))
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, garbage, got, "corrupt file left untouched")
}

func TestMissingDefaultBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := open(t, t.TempDir())
	c := seed(t, f, map[string]string{"README.md": "hi\n"})
	require.NoError(t, f.SetBranch(ctx, "acme", "r", "other", c.SHA, ""))
	require.NoError(t, f.DeleteBranch(ctx, "acme", "r", "main", c.SHA))
	s, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.True(t, s.Exists)
	assert.False(t, s.Empty)
	assert.Nil(t, s.Base)
}

func TestLockContention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f1, err := Open(dir, Options{LockTimeout: -1})
	require.NoError(t, err)

	_, err = Open(dir, Options{LockTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), "another fleetbot apply holds the lock on "+f1.Root())
	assert.Contains(t, err.Error(), "pid ")

	// A waiter says it waits, and gets the lock once the holder closes.
	waiting := &signalOnWrite{done: make(chan struct{})}
	got := make(chan error, 1)
	go func() {
		f2, err := Open(dir, Options{LockTimeout: time.Minute, // a deadline for a hang, generous under load
			Logger: slog.New(slog.NewTextHandler(waiting, nil))})
		if err == nil {
			err = f2.Close()
		}
		got <- err
	}()
	<-waiting.done // the waiter found the lock held
	assert.Contains(t, waiting.first, "waiting for the local forge's lock")
	assert.Contains(t, waiting.first, "pid ")
	require.NoError(t, f1.Close())
	assert.NoError(t, <-got)
}

// signalOnWrite keeps the first log line written to it and closes done then.
type signalOnWrite struct {
	once  sync.Once
	first string
	done  chan struct{}
}

func (w *signalOnWrite) Write(p []byte) (int, error) {
	w.once.Do(func() {
		w.first = string(p)
		close(w.done)
	})
	return len(p), nil
}

func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv("FLEETBOT_LOCK_CHILD") != "" {
		f, err := Open(os.Getenv("FLEETBOT_LOCK_CHILD"), Options{LockTimeout: -1})
		if err != nil {
			os.Stdout.WriteString("child: " + err.Error())
			os.Exit(3)
		}
		_ = f.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	f, err := Open(dir, Options{LockTimeout: -1})
	require.NoError(t, err)
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
		cmd.Env = append(os.Environ(), "FLEETBOT_LOCK_CHILD="+dir)
		return cmd
	}
	out, err := child().CombinedOutput()
	require.Error(t, err, "second process must not get the lock")
	assert.True(t, strings.Contains(string(out), "another fleetbot apply holds the lock"), string(out))
	require.NoError(t, f.Close())
	out, err = child().CombinedOutput()
	assert.NoError(t, err, string(out))
}

// TestCapabilities: the local forge declares that it records merges done with plain git and
// checks CODEOWNERS offline; it has no batched scan, no write budget and always protects.
func TestCapabilities(t *testing.T) {
	t.Parallel()
	caps := open(t, t.TempDir()).Capabilities()
	assert.NotNil(t, caps.MergeRecorder)
	assert.NotNil(t, caps.Codeowners)
	assert.Nil(t, caps.Scanner)
	assert.Nil(t, caps.WriteGate)
	assert.Nil(t, caps.Protection)
}

// TestConcurrentCommits commits to several repos at once (the forge's object writers are
// shared between them) and has git check every repo.
func TestConcurrentCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	f := open(t, dir)
	repos := []string{"a", "b", "c", "d", "e", "f"}
	for _, r := range repos {
		require.NoError(t, f.CreateRepo(ctx, pr.RepoSpec{Owner: "acme", Repo: r, Kind: "cluster", Name: r, DefaultBranch: "main"}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(repos))
	for _, r := range repos {
		wg.Go(func() {
			parent, tree := "", ""
			for i := range 3 {
				c, err := f.Commit(ctx, "acme", r, pr.NewCommit{Parent: parent, BaseTree: tree, Message: "commit\n",
					Changes: []pr.Change{{Path: "dir/" + r + ".yaml", Content: []byte(strings.Repeat(r, i+1) + "\n")}}})
				if err != nil {
					errs <- err
					return
				}
				if err := f.SetBranch(ctx, "acme", r, "main", c.SHA, parent); err != nil {
					errs <- err
					return
				}
				parent, tree = c.SHA, c.Tree
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return
	}
	for _, r := range repos {
		gitDir := filepath.Join(dir, "acme", r+".git")
		out, err := exec.Command("git", "--git-dir", gitDir, "fsck", "--strict", "--no-dangling").CombinedOutput()
		require.NoError(t, err, "git fsck %s: %s", r, out)
		out, err = exec.Command("git", "--git-dir", gitDir, "show", "main:dir/"+r+".yaml").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, strings.Repeat(r, 3)+"\n", string(out), "repo %s", r)
	}
}

// TestSnapshotHealth: the default branch head's commit statuses (statuses.json, as Flux posts
// them on GitHub) give its combined health and the failing contexts with their message and
// link, for status views; none is unknown, and a corrupt file leaves it unknown.
func TestSnapshotHealth(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := open(t, dir)
	head := seed(t, f, map[string]string{"README.md": "hi\n"})
	s, err := f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Empty(t, s.Base.Status, "no status: unknown")

	require.NoError(t, f.SetStatus("acme", "r", head.SHA, "kustomization/flux-system/abc", pr.StatusSuccess))
	require.NoError(t, f.PostStatus("acme", "r", head.SHA, pr.CommitStatus{Context: "kustomization/platform-metallb/abc", State: pr.StatusFailure,
		Description: "IPAddressPool/metallb-system/pool dry-run failed: no matches for kind", TargetURL: "https://grafana.example.com/d/flux"}))
	require.NoError(t, f.SetStatus("acme", "r", "0000000000000000000000000000000000000000", "kustomization/apps/abc", pr.StatusError))
	s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, pr.StatusFailure, s.Base.Status)
	assert.Equal(t, []pr.CommitStatus{{Context: "kustomization/platform-metallb/abc", State: pr.StatusFailure, CreatedAt: fixedClock()(),
		Description: "IPAddressPool/metallb-system/pool dry-run failed: no matches for kind", TargetURL: "https://grafana.example.com/d/flux"}},
		s.Base.Failing, "the head's failing statuses only")

	require.NoError(t, f.SetStatus("acme", "r", head.SHA, "kustomization/platform-metallb/abc", pr.StatusSuccess))
	s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, pr.StatusSuccess, s.Base.Status, "the newest status of each context counts")
	assert.Empty(t, s.Base.Failing)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "acme", "r.statuses.json"), []byte("{not json"), 0o644))
	s, err = f.Snapshot(ctx, "acme", "r", "main", "fleetbot/sync")
	require.NoError(t, err, "health is for views: a corrupt file fails no snapshot")
	assert.Empty(t, s.Base.Status)
}
