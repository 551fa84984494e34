package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// ContentTransport is how the forge writes a commit and moves its branch.
type ContentTransport string

const (
	// ContentTransportAPI writes through the Git Data API: a blob per binary file, a tree, a
	// commit and a ref move, each a content-creating request (the default).
	ContentTransportAPI ContentTransport = "api"
	// ContentTransportGit builds the commit in memory and sends it with one git push over
	// HTTPS (smart HTTP, the installation token as password), with a lease on the branch's
	// old value; it falls back to the Git Data API when the push is refused.
	ContentTransportGit ContentTransport = "git"
)

// DefaultContentTransport is the content transport of fleetbot's commands (apply, serve) when
// none is asked for; ForgeOptions' zero value is ContentTransportAPI.
const DefaultContentTransport = ContentTransportGit

// ParseContentTransport reads a --content-transport value: "api" (or "") or "git".
func ParseContentTransport(s string) (ContentTransport, error) {
	switch ContentTransport(strings.ToLower(strings.TrimSpace(s))) {
	case "", ContentTransportAPI:
		return ContentTransportAPI, nil
	case ContentTransportGit:
		return ContentTransportGit, nil
	}
	return "", fmt.Errorf("content transport %q: want %q (Git Data API) or %q (git push over HTTPS)", s, ContentTransportAPI, ContentTransportGit)
}

// leaseError is a push refused because the branch is no longer at the value it names: now is
// where the branch is (zero: absent; zero too when the refusal did not say and the refs could
// not be read again).
type leaseError struct {
	branch   string
	old, now plumbing.Hash
	detail   string
}

func (e *leaseError) Error() string {
	s := fmt.Sprintf("the branch moved since it was read: %s is at %s, expected %s", e.branch, short(e.now), short(e.old))
	if e.detail != "" {
		s += " (" + e.detail + ")"
	}
	return s
}

// localCommit is a commit built in memory for a git push: its new objects (the commit, every
// tree of its listing, the blobs it writes) and what the Git Data API needs to write the same
// commit when the push is refused.
type localCommit struct {
	hash   plumbing.Hash
	nc     pr.NewCommit
	sig    object.Signature
	objs   *memory.Storage
	hashes []plumbing.Hash
	pushed bool
}

// gitPush reports whether the forge writes content with git push.
func (f *Forge) gitPush() bool { return f.opts.ContentTransport == ContentTransportGit }

// commitIdentity is the author and committer of a pushed commit: the bot's login and its
// no-reply address, dated by the forge's clock (whole seconds, as git stores them).
func (f *Forge) commitIdentity(ctx context.Context) object.Signature {
	login := f.selfLogin(ctx)
	if login == "" {
		login = "fleetbot"
	}
	return object.Signature{Name: login, Email: login + "@users.noreply.github.com", When: f.opts.Now().UTC().Truncate(time.Second)}
}

// buildLocal builds nc in memory when the listing of its base tree is known (a root commit,
// or a base the forge has listed); ok is false otherwise, and the Git Data API writes it.
// It sends no request, but for the bot's login, read once per process.
func (f *Forge) buildLocal(ctx context.Context, e *repoEntry, nc pr.NewCommit) (pr.Commit, bool, error) {
	st := e.state()
	var files gittree.Listing
	switch {
	case nc.BaseTree == "":
		files = gittree.Listing{}
	case st.Base != nil && st.Base.Tree == nc.BaseTree && st.Files != nil:
		files = st.Files.Clone()
	case e.commits[nc.Parent] != nil && e.commits[nc.Parent].commit.Tree == nc.BaseTree && e.commits[nc.Parent].files != nil:
		// On a commit built here and not pushed yet (a new repo's bootstrap, pushed with it).
		files = e.commits[nc.Parent].files.Clone()
	default:
		return pr.Commit{}, false, nil
	}
	if nc.Parent == "" && !st.Empty {
		return pr.Commit{}, false, nil // a root commit on a repo with history: as the API does it
	}
	lc := &localCommit{nc: nc, sig: f.commitIdentity(ctx), objs: memory.NewStorage()}
	put := func(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
		o := lc.objs.NewEncodedObject()
		o.SetType(t)
		w, err := o.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(data); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := lc.objs.SetEncodedObject(o)
		if err == nil {
			lc.hashes = append(lc.hashes, h)
		}
		return h, err
	}
	for _, ch := range nc.Changes {
		if ch.Delete {
			delete(files, ch.Path)
			continue
		}
		mode := ch.Mode
		if mode == 0 {
			mode = gittree.ModeFile
		}
		h, err := put(plumbing.BlobObject, ch.Content)
		if err != nil {
			return pr.Commit{}, false, fmt.Errorf("building blob %s: %w", ch.Path, err)
		}
		files[ch.Path] = gittree.Entry{Mode: mode, Hash: h.String()}
	}
	root, trees, err := gittree.Trees(files)
	if err != nil {
		return pr.Commit{}, false, fmt.Errorf("building the tree: %w", err)
	}
	for _, t := range trees {
		if _, err := put(plumbing.TreeObject, t.Data); err != nil {
			return pr.Commit{}, false, fmt.Errorf("building tree %s: %w", t.Hash, err)
		}
	}
	c := &object.Commit{Author: lc.sig, Committer: lc.sig, Message: nc.Message, TreeHash: plumbing.NewHash(root)}
	if nc.Parent != "" {
		c.ParentHashes = []plumbing.Hash{plumbing.NewHash(nc.Parent)}
	}
	o := lc.objs.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return pr.Commit{}, false, fmt.Errorf("building the commit: %w", err)
	}
	if lc.hash, err = lc.objs.SetEncodedObject(o); err != nil {
		return pr.Commit{}, false, fmt.Errorf("building the commit: %w", err)
	}
	lc.hashes = append(lc.hashes, lc.hash)
	out := pr.Commit{SHA: lc.hash.String(), Tree: root, Message: nc.Message}
	if nc.Parent != "" {
		out.Parents = []string{nc.Parent}
	}
	e.commits[out.SHA] = &written{commit: out, files: files, local: lc}
	return out, true, nil
}

// apiAuthor is lc's identity for the Git Data API, so that a refused push is written as the
// very same commit (GitHub does not sign a commit given an author).
func (lc *localCommit) apiAuthor() *gh.CommitAuthor {
	when := gh.Timestamp{Time: lc.sig.When}
	return &gh.CommitAuthor{Name: gh.String(lc.sig.Name), Email: gh.String(lc.sig.Email), Date: &when}
}

// gitURL is the smart-HTTP URL of a repo: https://HOST/OWNER/REPO.git, HOST being github.com
// for api.github.com and the Enterprise host otherwise. It never carries credentials: the
// client's authentication adds the token as a header.
func (f *Forge) gitURL(owner, repo string) string {
	u := *f.api.BaseURL
	u.User = nil
	if strings.EqualFold(u.Host, "api.github.com") {
		u.Host = "github.com"
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3") + "/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + ".git"
	u.RawPath = ""
	return u.String()
}

// pushRef moves branch from old to next (zero: delete it) with one receive-pack request whose
// command names old as the branch's value (zero: the branch must not exist), sending lc's
// objects (nil: none, an empty pack; a deletion sends no pack), so that a branch moved by
// anyone else since it was read is never overwritten: that refusal is a *leaseError. It reads
// the refs first (one GET) and sends nothing when they already show the lease broken.
func (f *Forge) pushRef(ctx context.Context, owner, repo, branch string, old, next plumbing.Hash, lc *localCommit) error {
	return f.pushRefs(ctx, owner, repo, []refUpdate{{branch: branch, old: old, next: next, lc: lc}})
}

// refUpdate is one command of a push: branch from old to next, with lc's objects (nil: none).
type refUpdate struct {
	branch    string
	old, next plumbing.Hash
	lc        *localCommit
}

// pushRefs is pushRef of several branches in one receive-pack request (one command each, one
// pack of all their objects): git applies every command or, with atomic pushes, none; GitHub
// checks each command's old value under the ref's lock.
func (f *Forge) pushRefs(ctx context.Context, owner, repo string, ups []refUpdate) error {
	sess, adv, err := f.remoteRefs(ctx, owner, repo)
	if err != nil {
		return err
	}
	defer func() { _ = sess.Close() }()
	req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
	if len(ups) > 1 && adv.Capabilities.Supports(capability.Atomic) {
		_ = req.Capabilities.Set(capability.Atomic) // all the commands or none
	}
	objs := memory.NewStorage()
	var hashes []plumbing.Hash
	for _, u := range ups {
		name := plumbing.NewBranchReferenceName(u.branch)
		if cur := advertised(adv, name); cur != u.old {
			return &leaseError{branch: u.branch, old: u.old, now: cur}
		}
		req.Commands = append(req.Commands, &packp.Command{Name: name, Old: u.old, New: u.next})
		if u.lc == nil {
			continue
		}
		for _, h := range u.lc.hashes {
			o, err := u.lc.objs.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				return fmt.Errorf("packing the commit: %w", err)
			}
			if _, err := objs.SetEncodedObject(o); err != nil {
				return fmt.Errorf("packing the commit: %w", err)
			}
			hashes = append(hashes, h)
		}
	}
	if slices.ContainsFunc(ups, func(u refUpdate) bool { return !u.next.IsZero() }) {
		var pack bytes.Buffer
		if _, err := packfile.NewEncoder(&pack, objs, false).Encode(hashes, 0); err != nil {
			return fmt.Errorf("packing the commit: %w", err)
		}
		req.Packfile = io.NopCloser(&pack)
	}
	rs, err := sess.ReceivePack(ctx, req)
	if err == nil {
		for _, u := range ups {
			if u.lc != nil {
				u.lc.pushed = true
			}
		}
		return nil
	}
	if rs != nil {
		for i, cs := range rs.CommandStatuses {
			if cs.Error() == nil || i >= len(ups) {
				continue
			}
			u := ups[i]
			// Whether the branch moved meanwhile decides between a lost lease and another
			// refusal (a hook, a protected branch), so read it again (one GET).
			now, known := plumbing.ZeroHash, false
			if s2, adv2, rerr := f.remoteRefs(ctx, owner, repo); rerr == nil {
				_ = s2.Close()
				now, known = advertised(adv2, plumbing.NewBranchReferenceName(u.branch)), true
			}
			if known && now != u.old || !known && leaseRefusal(cs.Status) {
				return &leaseError{branch: u.branch, old: u.old, now: now, detail: "refused: " + cs.Status}
			}
		}
	}
	names := make([]string, len(ups))
	for i, u := range ups {
		names[i] = u.branch
	}
	return fmt.Errorf("pushing %s: %w", strings.Join(names, " and "), err)
}

// advertised is the value of ref among the advertised refs, zero when absent.
func advertised(adv *packp.AdvRefs, ref plumbing.ReferenceName) plumbing.Hash {
	if h, ok := adv.References[ref.String()]; ok {
		return h
	}
	return plumbing.ZeroHash
}

// remoteRefs opens a receive-pack session on a repo and reads its refs (one GET).
func (f *Forge) remoteRefs(ctx context.Context, owner, repo string) (transport.ReceivePackSession, *packp.AdvRefs, error) {
	ep, err := transport.NewEndpoint(f.gitURL(owner, repo))
	if err != nil {
		return nil, nil, fmt.Errorf("git URL of %s/%s: %w", owner, repo, err)
	}
	sess, err := githttp.NewClient(f.api.Client()).NewReceivePackSession(ep, nil)
	if err != nil {
		return nil, nil, err
	}
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		_ = sess.Close()
		return nil, nil, fmt.Errorf("reading the refs: %w", err)
	}
	return sess, adv, nil
}

// leaseRefusal reports whether a receive-pack "ng" reason says the ref was not at its
// expected old value (git: "failed to update ref", "failed to lock", "stale info",
// "reference already exists"). Any other refusal is checked by reading the ref again.
func leaseRefusal(status string) bool {
	s := strings.ToLower(status)
	for _, w := range []string{"failed to update ref", "lock", "stale", "already exists", "fetch first"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func short(h plumbing.Hash) string {
	if h.IsZero() {
		return "nothing (absent)"
	}
	return report.ShortSHA(h.String())
}

// isGitRequest reports whether a request is git smart HTTP (info/refs, upload-pack,
// receive-pack), whose credentials GitHub takes as basic auth only.
func isGitRequest(path string) bool {
	return strings.HasSuffix(path, ".git/info/refs") || strings.HasSuffix(path, ".git/git-receive-pack") ||
		strings.HasSuffix(path, ".git/git-upload-pack")
}

// gitAuthTransport rewrites the "Authorization: token X" header of a git request to basic
// auth x-access-token:X, the form git over HTTPS accepts. The token stays in the header:
// never in a URL, an error or a log.
type gitAuthTransport struct{ next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t gitAuthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "token ")
	if !ok || !isGitRequest(req.URL.Path) {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.SetBasicAuth("x-access-token", tok)
	return t.next.RoundTrip(r)
}

// pushOrFallBack pushes w (built by Commit) to branch with a lease on expect, the head the
// caller read ("" absent). pushed is true when the push landed. A broken lease is
// pr.ErrRefMoved: someone moved the branch since it was read, and the repo is planned again (a
// human commit on the bot branch then blocks it, as with the Git Data API). Any other refusal
// (a protected branch, a token without contents:write over git, the network) writes the same
// commit through the Git Data API, and SetBranch moves the branch with it, as a
// compare-and-swap too.
func (f *Forge) pushOrFallBack(ctx context.Context, owner, repo string, e *repoEntry, branch, expect string, w *written) (pushed bool, err error) {
	full := owner + "/" + repo
	lc := w.local
	old := plumbing.ZeroHash
	if expect != "" {
		old = plumbing.NewHash(expect)
	}
	perr := f.pushRef(ctx, owner, repo, branch, old, lc.hash, lc)
	var lease *leaseError
	switch {
	case perr == nil:
		return true, nil
	case errors.As(perr, &lease) && lease.now == lc.hash:
		lc.pushed = true // pushed by an earlier call whose answer was lost
		return true, nil
	case errors.As(perr, &lease):
		f.forgetRefs(owner, repo, e)
		return false, fmt.Errorf("git push of %s to %s: %w", report.ShortSHA(lc.hash.String()), full,
			refMoved(full, branch, hashString(lease.now), expect))
	case ctx.Err() != nil:
		return false, fmt.Errorf("git push of %s to %s: %w", branch, full, ctx.Err())
	}
	f.log.Warn("git push refused; writing the same commit through the Git Data API", "repo", full, "branch", branch, "err", perr)
	lc.pushed = true // whatever happens next, never push it again
	c, err := f.apiCommit(ctx, owner, repo, e, lc.nc, lc.apiAuthor())
	if err != nil {
		return false, err
	}
	if c.SHA != lc.hash.String() {
		return false, fmt.Errorf("writing %s to %s through the Git Data API after a refused git push (%v): GitHub wrote commit %s instead of %s; the next run writes it again",
			branch, full, perr, report.ShortSHA(c.SHA), report.ShortSHA(lc.hash.String()))
	}
	return false, nil
}

// SetBranches implements pr.BranchSetter: when every move's commit was built in memory by
// Commit (ContentTransportGit), all of them go in one git push, one command per branch with its
// lease, atomic where the server supports it (a new repo's bootstrap and bot branch: one
// content-creating request instead of two); each branch's bookkeeping then runs as SetBranch's
// would (a new repo's protection and grants once its default branch exists). A lost lease is
// pr.ErrRefMoved, nothing moved. Moves it cannot push together (a commit written through the
// Git Data API, a push refused for another reason) go one by one through SetBranch's path, each
// pushed or written through the API on its own.
func (f *Forge) SetBranches(ctx context.Context, owner, repo string, moves []pr.BranchMove) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	full := owner + "/" + repo
	ups := make([]refUpdate, 0, len(moves))
	for _, m := range moves {
		w := e.commits[m.SHA]
		if w == nil || w.local == nil || w.local.pushed {
			ups = nil
			break
		}
		old := plumbing.ZeroHash
		if m.Expect != "" {
			old = plumbing.NewHash(m.Expect)
		}
		ups = append(ups, refUpdate{branch: m.Branch, old: old, next: w.local.hash, lc: w.local})
	}
	pushed := false
	if len(ups) > 0 && f.gitPush() {
		err := f.pushRefs(ctx, owner, repo, ups)
		var lease *leaseError
		switch {
		case err == nil:
			pushed = true
		case errors.As(err, &lease):
			f.forgetRefs(owner, repo, e)
			return fmt.Errorf("git push to %s: %w", full, refMoved(full, lease.branch, hashString(lease.now), hashString(lease.old)))
		case ctx.Err() != nil:
			return fmt.Errorf("git push to %s: %w", full, ctx.Err())
		default:
			f.log.Warn("git push of several branches refused; moving them one by one", "repo", full, "err", err)
			for _, u := range ups {
				u.lc.pushed = false // each is pushed, or written through the API, on its own
			}
		}
	}
	for _, m := range moves {
		if w := e.commits[m.SHA]; pushed && w != nil {
			w.local = nil // GitHub's now
		}
		if err := f.setBranch(ctx, owner, repo, e, m.Branch, m.SHA, m.Expect, pushed); err != nil {
			return err
		}
	}
	return nil
}

// Requests is the package-level Requests for this forge's content transport: with
// ContentTransportGit a commit and its branch move are one push (one content-creating POST
// git-receive-pack, after one GET of the refs), a new repo's bootstrap and bot branch one push
// together, binary files need no blob of their own and an empty repo's first commit is pushed
// as it is, with no Contents API call.
func (f *Forge) Requests(c pr.Cost) (writes, content int) {
	if !f.gitPush() {
		return Requests(c)
	}
	pushes := c.Commits
	if c.Bootstrap > 0 && c.Commits > 1 {
		pushes-- // a new repo's bootstrap and bot branch go in one push (SetBranches)
	}
	content = c.CreateRepo + pushes + c.PROpens + c.AutoMerge + c.Comments
	writes = content + c.CreateRepo + c.Grants + c.Protections + c.BranchDeletes + c.Labels + 2*c.AutoMerge +
		c.PRUpdates + c.PRCloses
	return writes, content
}
