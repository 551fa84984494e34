package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// DefaultAccessMaxAge is how long an observed repo access (teams, protection, collaborators)
// is trusted before Access reads it again. Access does not move any ref, so the one
// conditional read that proves a repo's content unchanged cannot prove its access unchanged;
// re-reading three endpoints per repo on every run would triple the cost of a no-op.
const DefaultAccessMaxAge = time.Hour

// ManagedTopic marks the repos fleetbot manages; ListManaged finds them by it.
const ManagedTopic = "fleetbot-managed"

// ForgeOptions tune a Forge.
type ForgeOptions struct {
	// CacheDir keeps the per-repo snapshot cache on disk (one JSON file per repo), so that a
	// no-op run in a new process also costs one conditional read per repo. "" keeps it in
	// memory only.
	CacheDir string
	// AccessMaxAge is how long an observed access is reused (default DefaultAccessMaxAge;
	// negative: always read).
	AccessMaxAge time.Duration
	// Login is the account fleetbot acts as ("fleetbot[bot]" for an App), never removed as a
	// collaborator. "" looks it up once when needed: GET /app (with the App's JWT) for an App,
	// GET /user for a token. fleetbot's own commits are told by their trailer, not by it.
	Login string
	// Logger receives debug logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of the access cache and the date of pushed commits (default time.Now).
	Now func() time.Time
	// Budget is what BeforeWrite prices a repo's writes against (default: the Client's
	// Budget, which also paces every write it sends).
	Budget WriteBudget
	// ContentTransport is how commits are written: ContentTransportAPI ("", the default: Git
	// Data API) or ContentTransportGit (one git push per commit, the Git Data API as fallback).
	// See ParseContentTransport and docs/github.md, "Content transport".
	ContentTransport ContentTransport
}

// WriteBudget is the port through which the forge asks, before a repo's writes start, whether
// the installation can afford them: the Client's *Budget in production, any other in tests
// or when several forges share one installation.
type WriteBudget interface {
	// Afford reports whether n more content-creating requests would all be admitted within
	// the budget's longest wait, and how long from now the last of them would wait.
	Afford(n int) (ok bool, wait time.Duration)
}

// Forge is fleetbot's GitHub forge: it implements reconcile.Forge (pr.Forge, ListManaged,
// Access, SetAccess) over one Client, that is one installation or token, with the cost rules of
// DESIGN §5: a Snapshot of an unchanged repo is one conditional request, a changed repo is
// written with the Git Data API (one tree, one commit, one ref move), or with one git push per
// commit when ForgeOptions.ContentTransport says so (gitpush.go), and every write goes through
// the installation's budget. Its methods are safe for concurrent use; the calls on one repo are
// serialised.
type Forge struct {
	c      *Client
	api    *gh.Client
	opts   ForgeOptions
	log    *slog.Logger
	budget WriteBudget

	// known is what the forge knows of the repos, shared with its views (see View).
	*known
}

// known is a forge's knowledge of the repos it read and wrote: every repo's cached state
// (snapshot, access, scan hint), the blobs read, fleetbot's login. A forge and its views
// share one, so that a check's read-only plan or a drift's fresh read of access starts from
// what the service's applies already know instead of reading every repo again.
type known struct {
	mu    sync.Mutex
	repos map[string]*repoEntry

	loginOnce sync.Once
	login     string

	// blobs are the blobs read so far, by hash (content-addressed: never stale).
	blobs blobCache

	// orgs is what the latest read of each owner found (by lower-case login): see orgSeen.
	orgs map[string]*orgSeen

	// noUpdateRefs is set once GitHub answered that its GraphQL schema has no updateRefs (a
	// GitHub Enterprise Server without it): branch moves then go through git push with a lease.
	noUpdateRefs atomic.Bool
}

// repoEntry is one repo's cached state behind its own lock.
type repoEntry struct {
	mu sync.Mutex
	st *repoState // nil until loaded
	// loaded is true once the disk cache was consulted.
	loaded bool
	// fresh is true when st.PR was read from GitHub by this process since the last
	// snapshot; false when the snapshot was answered from the cache (a 304) and a human may
	// have closed the PR since.
	fresh bool
	// commits remembers the commits this process wrote, for SetBranch to update the cache.
	commits map[string]*written
	// pendingProtection, then pendingTeams, are applied once the default branch exists (new
	// repos): teams get their roles only once the branch is protected.
	pendingProtection *policy.Protection
	pendingTeams      map[string]policy.Role
	// pendingRuleset, when set (declared branch rules), enforces pendingProtection instead of a
	// classic branch protection, where the owner has rulesets.
	pendingRuleset *policy.Ruleset
	// protectionUnavailable is GitHub's reason when this run could not protect the default
	// branch because of the organization's plan; see ProtectionUnavailable.
	protectionUnavailable string
	// hint is what the latest Scan saw of the repo, for the next Snapshot.
	hint *headHint
	// nodeID is the repository's GraphQL node id (updateRefs names the repo by it), from the
	// latest scan or the snapshot cache; "" when unknown.
	nodeID string
	// autoMergeSeen is the repo's "Allow auto-merge" setting as the latest Scan (or fleetbot's
	// own write) saw it; nil when unknown. Access reports it at no request of its own.
	autoMergeSeen *bool
}

type written struct {
	commit pr.Commit
	files  gittree.Listing // nil when unknown
	// local is set for a commit built in memory, to be pushed by SetBranch (ContentTransportGit).
	local *localCommit
}

// NewForge returns the GitHub forge over c.
func NewForge(c *Client, opts ForgeOptions) *Forge {
	if opts.AccessMaxAge == 0 {
		opts.AccessMaxAge = DefaultAccessMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	budget := opts.Budget
	if budget == nil {
		budget = c.Budget()
	}
	return &Forge{c: c, api: c.API(), opts: opts, log: log.With("forge", "github"), budget: budget,
		known: &known{repos: map[string]*repoEntry{}, login: opts.Login}}
}

// ViewOptions tune a view of a forge (see View).
type ViewOptions struct {
	// AccessMaxAge is how long the view reuses an observed access (0: the forge's; negative:
	// always read, for drift events that say access changed).
	AccessMaxAge time.Duration
}

// View returns a forge that sends its requests through c (another client of the same
// installation: a read-only one for plans) and shares f's knowledge of the repos: snapshots
// (on disk too, when f keeps them there), scan hints, observed access and blobs. A service
// plans control pull requests and reconciles drift on views of its apply forge: their first
// run after a start costs what an apply's would, not a full read of every repo. Calls on one
// repo are serialised across f and its views.
func (f *Forge) View(c *Client, o ViewOptions) *Forge {
	opts := f.opts
	opts.Budget = nil
	if o.AccessMaxAge != 0 {
		opts.AccessMaxAge = o.AccessMaxAge
	}
	return &Forge{c: c, api: c.API(), opts: opts, log: f.log, budget: c.Budget(), known: f.known}
}

// Client returns the client the forge writes through, for its statistics.
func (f *Forge) Client() *Client { return f.c }

// entry returns the locked cache entry of a repo; call the returned unlock when done.
func (f *Forge) entry(owner, repo string) (*repoEntry, func()) {
	key := strings.ToLower(owner + "/" + repo)
	f.mu.Lock()
	e, ok := f.repos[key]
	if !ok {
		e = &repoEntry{commits: map[string]*written{}}
		f.repos[key] = e
	}
	f.mu.Unlock()
	e.mu.Lock()
	if !e.loaded {
		e.loaded = true
		e.st = f.loadState(owner, repo)
	}
	return e, e.mu.Unlock
}

// errf wraps a GitHub error with what was attempted on which repo; the wrapper carries the
// error's class (OpError.Outcome). A rate limit that lifts too late is also pr.ErrDeferred: the
// repo is left for a later run, not failed, deferred until the limit's reset.
func errf(err error, op, repo string) error {
	if err == nil {
		return nil
	}
	w := &OpError{Op: op, Repo: repo, Err: err}
	if Classify(err) == RateLimited {
		return report.Classify(fmt.Errorf("%w: %w", pr.ErrDeferred, w), w.Outcome())
	}
	return w
}

func statusOf(resp *gh.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}

// Commit implements pr.Forge with the Git Data API: one tree (inline content on top of
// BaseTree, deletions as sha null) and one commit with no author, so GitHub authors it as the
// app and marks it verified. An empty repo (no branch at all) accepts no Git Data call, so its
// root commit is preceded by one Contents API call that creates the default branch; SetBranch
// then replaces that placeholder commit once.
//
// With ContentTransportGit it builds the commit in memory instead, when it knows the listing
// of the base tree, and sends nothing: SetBranch pushes it.
func (f *Forge) Commit(ctx context.Context, owner, repo string, nc pr.NewCommit) (pr.Commit, error) {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	if f.gitPush() {
		c, ok, err := f.buildLocal(ctx, e, nc)
		if err != nil {
			return pr.Commit{}, fmt.Errorf("building the commit for %s/%s in memory: %w", owner, repo, err)
		}
		if ok {
			return c, nil
		}
		f.log.Debug("base tree not listed: committing through the Git Data API", "repo", owner+"/"+repo)
	}
	return f.apiCommit(ctx, owner, repo, e, nc, nil)
}

// apiCommit writes nc with the Git Data API; author, when set, is the commit's author and
// committer (a refused push written again as the same commit).
func (f *Forge) apiCommit(ctx context.Context, owner, repo string, e *repoEntry, nc pr.NewCommit, author *gh.CommitAuthor) (pr.Commit, error) {
	full := owner + "/" + repo
	st := e.state()
	if nc.Parent == "" && st.Empty {
		if err := f.bootstrapEmpty(ctx, owner, repo, e, nc); err != nil {
			return pr.Commit{}, err
		}
	}
	var files gittree.Listing
	switch {
	case nc.BaseTree == "":
		files = gittree.Listing{}
	case st.Base != nil && st.Base.Tree == nc.BaseTree && st.Files != nil:
		files = st.Files.Clone()
	}
	entries := make([]*gh.TreeEntry, 0, len(nc.Changes))
	for _, ch := range nc.Changes {
		path := ch.Path
		if ch.Delete {
			entries = append(entries, &gh.TreeEntry{Path: &path, Mode: gh.String("100644"), Type: gh.String("blob")})
			if files != nil {
				delete(files, path)
			}
			continue
		}
		mode := ch.Mode
		if mode == 0 {
			mode = gittree.ModeFile
		}
		te := &gh.TreeEntry{Path: &path, Mode: gh.String(fmt.Sprintf("%06o", uint32(mode))), Type: gh.String("blob")}
		if isText(ch.Content) {
			te.Content = gh.String(string(ch.Content))
		} else {
			// Inline content is a JSON string; binary files need a base64 blob first.
			b, _, err := f.api.Git.CreateBlob(ctx, owner, repo, &gh.Blob{Content: gh.String(encodeBase64(ch.Content)), Encoding: gh.String("base64")})
			if err != nil {
				return pr.Commit{}, errf(err, "creating blob "+path+" in", full)
			}
			te.SHA = b.SHA
		}
		entries = append(entries, te)
		if files != nil {
			files[path] = gittree.Entry{Mode: mode, Hash: gittree.BlobHash(ch.Content)}
		}
	}
	tree := nc.BaseTree
	if len(entries) > 0 || tree == "" {
		t, _, err := f.api.Git.CreateTree(ctx, owner, repo, nc.BaseTree, entries)
		if err != nil {
			return pr.Commit{}, errf(err, "creating tree in", full)
		}
		tree = t.GetSHA()
	}
	in := &gh.Commit{Message: gh.String(nc.Message), Tree: &gh.Tree{SHA: gh.String(tree)}, Author: author, Committer: author}
	if nc.Parent != "" {
		in.Parents = []*gh.Commit{{SHA: gh.String(nc.Parent)}}
	}
	c, _, err := f.api.Git.CreateCommit(ctx, owner, repo, in, nil)
	if err != nil {
		return pr.Commit{}, errf(err, "creating commit in", full)
	}
	out := pr.Commit{SHA: c.GetSHA(), Tree: c.GetTree().GetSHA(), Message: c.GetMessage()}
	if out.Tree == "" {
		out.Tree = tree
	}
	if nc.Parent != "" {
		out.Parents = []string{nc.Parent}
	}
	e.commits[out.SHA] = &written{commit: out, files: files}
	return out, nil
}

// bootstrapEmpty creates the default branch of an empty repo with one Contents API call:
// the Git Data API refuses to work on a repo without commits. The file is the bootstrap's
// CODEOWNERS (README.md when there is none), so the branch has its code owners from its very
// first commit.
func (f *Forge) bootstrapEmpty(ctx context.Context, owner, repo string, e *repoEntry, nc pr.NewCommit) error {
	st := e.state()
	if st.RepoDefault == "" {
		// Not created by this process: perhaps by one whose create answer was lost.
		if err := f.ensureOwnTopics(ctx, owner, repo); err != nil {
			return err
		}
	}
	path, content := "README.md", []byte("# "+repo+"\n")
	for _, ch := range nc.Changes {
		if ch.Path == fanout.CodeownersPath && !ch.Delete {
			path, content = ch.Path, ch.Content
		}
	}
	branch := st.DefaultBranch
	res, resp, err := f.api.Repositories.CreateFile(ctx, owner, repo, path, &gh.RepositoryContentFileOptions{
		Message: gh.String("fleetbot: initialise empty repository"),
		Content: content,
		Branch:  gh.String(branch),
	})
	if err != nil {
		refusal := errf(err, "initialising empty repo", owner+"/"+repo)
		if code := statusOf(resp); code == http.StatusConflict || code == http.StatusUnprocessableEntity {
			return f.checkInitialised(ctx, owner, repo, e, branch, refusal)
		}
		return refusal
	}
	st.Empty = false
	st.Placeholder = res.Commit.GetSHA()
	if st.Branches == nil {
		st.Branches = map[string]string{}
	}
	st.Branches[branch] = st.Placeholder
	st.Base, st.Files = nil, nil
	st.RefsETag = ""
	return nil
}

// checkInitialised decides a refused bootstrap of an empty repo from where its default branch
// is now (one GET). Another writer — another replica whose share the repo was a moment ago, or
// a person — may have initialised the repo since the snapshot read it empty: GitHub then
// refuses the create of a file that exists without its sha (422) or a write racing another
// (409) (https://docs.github.com/rest/repos/contents#create-or-update-file-contents). A
// default branch that exists now is that lost race: pr.ErrRefMoved, the repo's cached refs are
// dropped and it is planned again from a fresh snapshot. Still absent: refusal.
func (f *Forge) checkInitialised(ctx context.Context, owner, repo string, e *repoEntry, branch string, refusal error) error {
	full := owner + "/" + repo
	ref, resp, err := f.api.Git.GetRef(ctx, owner, repo, "heads/"+branch)
	switch {
	case IsNotFound(err) || statusOf(resp) == http.StatusConflict:
		return refusal // no such branch, or the repo is still empty ("Git Repository is empty.")
	case err != nil:
		return fmt.Errorf("%w, and reading where branch %s is failed too: %w", refusal, branch, errf(err, "reading branch "+branch+" of", full))
	}
	cur := ref.GetObject().GetSHA()
	f.forgetRefs(owner, repo, e)
	return fmt.Errorf("initialising empty repo %s: %w", full, refMoved(full, branch, cur, ""))
}

// SetBranch implements pr.Forge: a compare-and-swap of the branch from expect to sha (refs.go):
// POST a branch the caller read as missing, GraphQL updateRefs with beforeOid for one it read
// at expect. The default branch of an empty repo, which the forge made itself with a
// placeholder commit (bootstrapEmpty), is moved from that placeholder. With
// ContentTransportGit, a commit built in memory is pushed with a lease on expect instead.
func (f *Forge) SetBranch(ctx context.Context, owner, repo, branch, sha, expect string) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	return f.setBranch(ctx, owner, repo, e, branch, sha, expect, false)
}

// setBranch is SetBranch on the locked entry e; pushed says the branch is already at sha (a
// joint push of SetBranches), so only the bookkeeping is left.
func (f *Forge) setBranch(ctx context.Context, owner, repo string, e *repoEntry, branch, sha, expect string, pushed bool) error {
	st := e.state()
	if w := e.commits[sha]; !pushed && w != nil && w.local != nil && !w.local.pushed {
		var err error
		pushed, err = f.pushOrFallBack(ctx, owner, repo, e, branch, expect, w)
		w.local = nil // its objects are GitHub's now, or the commit is abandoned
		if err != nil {
			return err
		}
	}
	if cur := st.Branches[branch]; expect == "" && cur != "" && cur == st.Placeholder && branch == st.DefaultBranch {
		// The default branch the forge itself made for an empty repo's bootstrap (perhaps in
		// this very call, when a refused push fell back to the Git Data API).
		expect = st.Placeholder
	}
	bootstrap := expect != "" && expect == st.Placeholder && branch == st.DefaultBranch
	if pushed {
		bootstrap = branch == st.DefaultBranch && st.Empty
		st.Empty = false
		if st.RepoDefault == "" && bootstrap {
			if err := f.ensureOwnTopics(ctx, owner, repo); err != nil {
				return err
			}
		}
	} else if err := f.moveBranch(ctx, owner, repo, e, branch, sha, expect); err != nil {
		return err
	}
	if st.Branches == nil {
		st.Branches = map[string]string{}
	}
	st.Branches[branch] = sha
	if st.BotBranch == "" && branch != st.DefaultBranch {
		st.BotBranch = branch // a repo created in this run: pr moves only the bot branch besides
	}
	w := e.commits[sha]
	switch branch {
	case st.DefaultBranch:
		if w != nil && w.files != nil {
			c := w.commit
			st.Base, st.Files = &c, w.files
		} else {
			st.Base, st.Files = nil, nil
		}
		if bootstrap {
			st.Placeholder = ""
			if err := f.afterBootstrap(ctx, owner, repo, e); err != nil {
				return err
			}
		}
	case st.BotBranch:
		if w != nil {
			c := w.commit
			st.Bot = &c
		} else {
			st.Bot = nil
		}
	}
	f.saveState(owner, repo, st)
	return nil
}

// afterBootstrap finishes a new repo once its default branch exists: the default branch
// setting and branch protection, which GitHub only accepts on an existing branch.
func (f *Forge) afterBootstrap(ctx context.Context, owner, repo string, e *repoEntry) error {
	st := e.state()
	full := owner + "/" + repo
	if st.RepoDefault != "" && st.RepoDefault != st.DefaultBranch {
		if _, _, err := f.api.Repositories.Edit(ctx, owner, repo, &gh.Repository{DefaultBranch: gh.String(st.DefaultBranch)}); err != nil {
			return errf(err, "setting the default branch of", full)
		}
		st.RepoDefault = st.DefaultBranch
	}
	if rs := e.pendingRuleset; rs != nil {
		e.pendingRuleset = nil
		done, err := f.bootstrapRuleset(ctx, owner, repo, e, rs)
		if err != nil {
			return err
		}
		if done {
			e.pendingProtection = nil
		}
	}
	if p := e.pendingProtection; p != nil {
		var err error
		reason, unavailable := f.planRefused(owner), false
		if reason == "" {
			err = f.protect(ctx, owner, repo, p)
			reason, unavailable = protectionUnavailable(err)
			if unavailable {
				f.notePlanRefused(owner, reason)
			}
		} else {
			unavailable = true
		}
		switch {
		case unavailable:
			// The plan has no protection for this repo: say so, grant the rest.
			e.protectionUnavailable = reason
			if st.Access != nil {
				st.Access.ProtectionUnavailable = reason
			}
		case err != nil:
			return err
		case st.Access != nil:
			st.Access.Protection = p
		}
		e.pendingProtection = nil
	}
	if len(e.pendingTeams) > 0 {
		// The grants the org's base role already gives are left out, as policy.Diff leaves
		// them out of an existing repo's plan.
		grants := policy.TeamsToGrant(e.pendingTeams, f.baseRole(owner))
		if err := f.grantTeams(ctx, owner, repo, grants, nil); err != nil {
			return err
		}
		if st.Access != nil {
			st.Access.Teams = grants
		}
		e.pendingTeams = nil
	}
	return nil
}

// DeleteBranch implements pr.Forge: GraphQL updateRefs deletes the branch while it is at
// expect (refs.go); a branch already gone is not an error.
func (f *Forge) DeleteBranch(ctx context.Context, owner, repo, branch, expect string) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	if err := f.moveBranch(ctx, owner, repo, e, branch, "", expect); err != nil {
		return err
	}
	delete(st.Branches, branch)
	if branch == st.BotBranch {
		st.Bot = nil
	}
	f.saveState(owner, repo, st)
	return nil
}

// OpenPR implements pr.Forge: one POST, plus one to add labels when there are any, plus the
// auto-merge mutation when asked.
func (f *Forge) OpenPR(ctx context.Context, owner, repo string, np pr.NewPR) (*pr.PullRequest, error) {
	full := owner + "/" + repo
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	p, resp, err := f.api.PullRequests.Create(ctx, owner, repo, &gh.NewPullRequest{
		Title: gh.String(np.Title), Head: gh.String(np.Head), Base: gh.String(np.Base), Body: gh.String(np.Body),
		MaintainerCanModify: gh.Bool(false),
	})
	if err != nil && statusOf(resp) == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(errMessage(err)), "a pull request already exists") {
		// Opened by a call whose answer was lost: continue with that pull request.
		p, err = f.adoptOpenPR(ctx, owner, repo, np)
	}
	if err != nil {
		if statusOf(resp) == 0 {
			// No answer: GitHub may have opened it. Read the pull request again next time.
			st.PRRead = false
			f.saveState(owner, repo, st)
		}
		return nil, errf(err, "opening pull request in", full)
	}
	out := toPR(p)
	st.PR, e.fresh = out, true
	f.saveState(owner, repo, st)
	if len(np.Labels) > 0 {
		if err := f.addLabels(ctx, owner, repo, out.Number, np.Labels); err != nil {
			return out, errf(err, fmt.Sprintf("labelling pull request #%d in", out.Number), full)
		}
	}
	if np.AutoMerge {
		merged, err := f.autoMerge(ctx, owner, repo, p, np)
		if err != nil {
			return out, err
		}
		if merged {
			out.State = pr.StateMerged
			st.PR = out
			f.saveState(owner, repo, st)
		}
	}
	return out, nil
}

// EnableAutoMerge implements pr.Forge for a pull request already open (a held restore once
// fleetbot may merge): one read of the pull request (its node id and head), then autoMerge as
// OpenPR runs it: the head must still be a.HeadSHA (and GitHub checks it again through
// expectedHeadOid), "Allow auto-merge" is turned on when off, and a pull request already
// mergeable is merged at once only under fleetbot's protection.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#get-a-pull-request and
// https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge
func (f *Forge) EnableAutoMerge(ctx context.Context, owner, repo string, number int, a pr.AutoMergeRequest) (bool, error) {
	full := owner + "/" + repo
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	p, _, err := f.api.PullRequests.Get(ctx, owner, repo, number)
	if err != nil {
		return false, errf(err, fmt.Sprintf("reading pull request #%d in", number), full)
	}
	if p.GetState() != "open" || p.GetMerged() {
		return false, fmt.Errorf("%w: pull request #%d of %s is %s, not open: fleetbot enables auto-merge only on an open pull request", ErrAutoMerge, number, full, toPR(p).State)
	}
	merged, err := f.autoMerge(ctx, owner, repo, p, pr.NewPR{Head: a.Head, Base: a.Base, HeadSHA: a.HeadSHA, AutoMerge: true, Protection: a.Protection})
	if merged {
		out := toPR(p)
		out.State = pr.StateMerged
		st.PR, e.fresh = out, true
		f.saveState(owner, repo, st)
	}
	return merged, err
}

// adoptOpenPR finds the open pull request from np.Head into np.Base (GitHub allows one) and
// gives it np's title and body, when it is fleetbot's: its body carries fleetbot's marker or
// its head is the commit fleetbot just pushed (np.HeadSHA). A pull request someone else opened
// from the bot branch is left as it is, with an error that says which and what to do.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#list-pull-requests
func (f *Forge) adoptOpenPR(ctx context.Context, owner, repo string, np pr.NewPR) (*gh.PullRequest, error) {
	ps, _, err := f.api.PullRequests.List(ctx, owner, repo, &gh.PullRequestListOptions{
		State: "open", Head: owner + ":" + np.Head, Base: np.Base, ListOptions: gh.ListOptions{PerPage: 1},
	})
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("GitHub says a pull request from %s already exists, but lists no open one from %s into %s", np.Head, np.Head, np.Base)
	}
	p := ps[0]
	if !pr.HasMarker(p.GetBody()) && (np.HeadSHA == "" || p.GetHead().GetSHA() != np.HeadSHA) {
		return nil, fmt.Errorf("pull request #%d (%s, by %s) from %s into %s is not fleetbot's: its body has no fleetbot marker and its head %s is not the commit fleetbot pushed (%s); fleetbot leaves it as it is and opens none: close it (or merge it after review) and the next run opens fleetbot's",
			p.GetNumber(), p.GetHTMLURL(), p.GetUser().GetLogin(), np.Head, np.Base, report.ShortSHA(p.GetHead().GetSHA()), report.ShortSHA(np.HeadSHA))
	}
	if p.GetTitle() == np.Title && p.GetBody() == np.Body {
		return p, nil
	}
	f.log.Info("continuing with the pull request GitHub already has (an earlier answer was lost)", "repo", owner+"/"+repo, "number", p.GetNumber())
	p, _, err = f.api.PullRequests.Edit(ctx, owner, repo, p.GetNumber(), &gh.PullRequest{Title: gh.String(np.Title), Body: gh.String(np.Body)})
	return p, err
}

// UpdatePR implements pr.Forge. It writes nothing when title and body are already those.
func (f *Forge) UpdatePR(ctx context.Context, owner, repo string, number int, title, body string) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	if p := st.PR; p != nil && p.Number == number && p.Title == title && p.Body == body && p.State == pr.StateOpen {
		return nil
	}
	p, _, err := f.api.PullRequests.Edit(ctx, owner, repo, number, &gh.PullRequest{Title: gh.String(title), Body: gh.String(body)})
	if err != nil {
		return errf(err, fmt.Sprintf("updating pull request #%d in", number), owner+"/"+repo)
	}
	st.PR, e.fresh = toPR(p), true
	f.saveState(owner, repo, st)
	return nil
}

// ClosePR implements pr.Forge: a comment, then the close.
func (f *Forge) ClosePR(ctx context.Context, owner, repo string, number int, comment string) error {
	full := owner + "/" + repo
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	if comment != "" {
		if _, _, err := f.api.Issues.CreateComment(ctx, owner, repo, number, &gh.IssueComment{Body: gh.String(comment)}); err != nil {
			return errf(err, fmt.Sprintf("commenting on pull request #%d in", number), full)
		}
	}
	p, _, err := f.api.PullRequests.Edit(ctx, owner, repo, number, &gh.PullRequest{State: gh.String("closed")})
	if err != nil {
		return errf(err, fmt.Sprintf("closing pull request #%d in", number), full)
	}
	st.PR, e.fresh = toPR(p), true
	f.saveState(owner, repo, st)
	return nil
}

// Comment implements pr.Forge.
func (f *Forge) Comment(ctx context.Context, owner, repo string, number int, body string) error {
	_, _, err := f.api.Issues.CreateComment(ctx, owner, repo, number, &gh.IssueComment{Body: gh.String(body)})
	return errf(err, fmt.Sprintf("commenting on pull request #%d in", number), owner+"/"+repo)
}

// BeforeWrite implements pr.WriteGate; reconcile calls it before it executes a decision that
// writes. It returns an error wrapping pr.ErrStale when the decision was made on a cached pull
// request that GitHub now reports differently (closed by hand since), and one wrapping
// pr.ErrDeferred when the write budget cannot afford the repo's content-creating requests
// within the wait the client accepts: the repo is then left for the next run instead of being
// started and stopped half-way.
func (f *Forge) BeforeWrite(ctx context.Context, owner, repo string, cost pr.Cost) error {
	if err := f.checkPR(ctx, owner, repo); err != nil {
		return err
	}
	_, n := f.Requests(cost)
	if ok, wait := f.budget.Afford(n); !ok {
		err := fmt.Errorf("%w: %s/%s needs %d content-creating requests; the write budget has room for them in %s",
			pr.ErrDeferred, owner, repo, n, wait.Round(time.Second))
		return report.Classify(err, f.budgetOutcome(wait))
	}
	return nil
}

// budgetOutcome is the deferral of a repo the write budget cannot afford now: until its room
// comes, wait from now on the client's clock (the one every wait of the installation runs
// on); a rate limit when GitHub paused the installation.
func (f *Forge) budgetOutcome(wait time.Duration) report.Outcome {
	b := f.c.Budget()
	now := b.Config().Clock.Now()
	o := report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonBudgetExhausted, RetryAt: now.Add(wait)}
	if b.Stats().PausedUntil.After(now) {
		o.Reason = report.ReasonRateLimited
	}
	return o
}

// Capabilities implements pr.Forge: GitHub scans an owner in batches, gates writes on its
// budget, checks CODEOWNERS itself and may refuse branch protection on some plans. It records
// merges itself.
func (f *Forge) Capabilities() pr.Capabilities {
	c := pr.Capabilities{Scanner: f, WriteGate: f, Codeowners: f, Protection: f, Rollout: f, Restorer: f}
	if f.gitPush() {
		c.Branches = f // one push moves several branches
	}
	return c
}

// checkPR re-reads an open pull request known only from the cache (one conditional read),
// since closing a PR moves no ref and so escapes the snapshot's one read.
func (f *Forge) checkPR(ctx context.Context, owner, repo string) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	if e.fresh || st.PR == nil || st.PR.State != pr.StateOpen {
		return nil
	}
	p, _, err := f.api.PullRequests.Get(ctx, owner, repo, st.PR.Number)
	if err != nil {
		return errf(err, fmt.Sprintf("reading pull request #%d of", st.PR.Number), owner+"/"+repo)
	}
	got := toPR(p)
	e.fresh = true
	if got.State == st.PR.State && got.HeadSHA == st.PR.HeadSHA {
		return nil
	}
	st.PR = got
	f.saveState(owner, repo, st)
	return fmt.Errorf("%w: pull request #%d of %s/%s is now %s", pr.ErrStale, got.Number, owner, repo, got.State)
}

// Requests returns the mutating requests executing a decision of cost c sends to GitHub
// (writes) and how many of them GitHub counts as content creation (content, see kinds.go), so
// that the budget is asked for every one of them:
//
//   - a created repo: POST repos (content) and PUT topics, then a PUT per protection and per
//     team grant once its default branch exists;
//   - an empty repo's bootstrap: one Contents API PUT (content) before its root commit;
//   - a commit: POST tree and POST commit (content), plus a POST blob (content) per binary
//     file, which a tree cannot carry inline;
//   - a branch created or moved: POST ref or the GraphQL mutation updateRefs (content: the
//     budget counts a ref move as content creation); deleted: updateRefs (refs.go);
//   - a pull request opened: POST pulls (content), POST labels; auto-merge: at most PATCH the
//     repo's setting, the GraphQL mutation and a PUT merge (content) when GitHub refuses
//     auto-merge on a pull request that is already mergeable;
//   - a pull request updated or closed: PATCH pulls; a comment: POST comments (content).
//
// They are upper bounds: UpdatePR writes nothing when the pull request already reads as
// asked, and auto-merge needs its PATCH and PUT only in some states.
func Requests(c pr.Cost) (writes, content int) {
	content = c.CreateRepo + c.Bootstrap + 2*c.Commits + c.Blobs + c.BranchMoves + c.PROpens + c.AutoMerge + c.Comments
	writes = content + c.CreateRepo + c.Grants + c.Protections + c.BranchDeletes + c.Labels + 2*c.AutoMerge +
		c.PRUpdates + c.PRCloses
	return writes, content
}

func toPR(p *gh.PullRequest) *pr.PullRequest {
	out := &pr.PullRequest{
		Number: p.GetNumber(), State: p.GetState(), Head: p.GetHead().GetRef(), Base: p.GetBase().GetRef(),
		Title: p.GetTitle(), Body: p.GetBody(), URL: p.GetHTMLURL(), HeadSHA: p.GetHead().GetSHA(),
		CreatedAt: p.GetCreatedAt().Time,
	}
	if p.GetMerged() || p.MergedAt != nil {
		out.State = pr.StateMerged
	}
	return out
}

func errMessage(err error) string {
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		s := er.Message
		for _, e := range er.Errors {
			s += " " + e.Message
		}
		return s
	}
	return err.Error()
}
