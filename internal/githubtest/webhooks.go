package githubtest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// pendingEvent is a webhook queued under the lock and delivered after the request.
type pendingEvent struct {
	event   string
	payload any
}

// queueEvent builds (under Server.mu) and queues a webhook, when a hook URL is configured.
func (s *Server) queueEvent(event string, build func() any) {
	if s.cfg.hookURL == "" && s.cfg.hookURLFile == "" {
		return
	}
	s.events = append(s.events, pendingEvent{event: event, payload: build()})
}

// hookTarget is where webhooks go now: WithWebhook's URL, or the content of
// WithWebhookURLFile's file ("" while it has none).
func (s *Server) hookTarget() string {
	if s.cfg.hookURLFile == "" {
		return s.cfg.hookURL
	}
	b, err := os.ReadFile(s.cfg.hookURLFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// flushEvents delivers queued webhooks in order, in the background.
func (s *Server) flushEvents() {
	s.mu.Lock()
	events := s.events
	s.events = nil
	s.mu.Unlock()
	if len(events) == 0 {
		return
	}
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		url := s.hookTarget()
		if url == "" {
			s.cfg.logger.Info("no webhook URL yet; events dropped", "events", len(events), "file", s.cfg.hookURLFile)
			return
		}
		for _, e := range events {
			ctx, cancel := context.WithTimeout(s.closeCtx, 10*time.Second)
			if err := s.Deliver(ctx, url, s.cfg.hookSecret, e.event, e.payload); err != nil {
				s.cfg.logger.Warn("delivering webhook", "event", e.event, "err", err)
			}
			cancel()
		}
	}()
}

// Sign returns the X-Hub-Signature-256 value GitHub sends for body: "sha256=" + hex HMAC-SHA256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Deliver POSTs payload (JSON-encoded) to url as GitHub delivers a webhook: signed with
// X-Hub-Signature-256, with X-GitHub-Event, X-GitHub-Delivery and a GitHub-Hookshot user agent.
// A response outside 2xx is an error.
func (s *Server) Deliver(ctx context.Context, url, secret, event string, payload any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encoding %s webhook: %w", event, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building %s webhook: %w", event, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", deliveryID())
	req.Header.Set("X-GitHub-Hook-ID", "1")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(s.cfg.appID))
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("delivering %s webhook: %w", event, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("delivering %s webhook to %s: status %d", event, url, resp.StatusCode)
	}
	return nil
}

func deliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (s *Server) installationForLocked(owner string) *github.Installation {
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, owner) {
			full := s.installationJSON(in)
			return &github.Installation{ID: full.ID, NodeID: github.String(nodeID("Installation", in.ID))}
		}
	}
	return nil
}

func (s *Server) pushEventLocked(rm *repoMeta, g *gitRepo, ch refChange, actor string) *github.PushEvent {
	repo := s.repoJSON(rm)
	ev := &github.PushEvent{
		Ref:     github.String(ch.name),
		Before:  github.String(ch.before.String()),
		After:   github.String(ch.after.String()),
		Created: github.Bool(ch.before.IsZero()),
		Deleted: github.Bool(ch.after.IsZero()),
		Forced:  github.Bool(!ch.before.IsZero() && !ch.after.IsZero() && !g.isAncestor(ch.before, ch.after)),
		Compare: github.String(fmt.Sprintf("%s/%s/compare/%s...%s", s.URL, rm.fullName(), ch.before.String()[:12], ch.after.String()[:12])),
		Repo: &github.PushEventRepository{
			ID: repo.ID, NodeID: repo.NodeID, Name: repo.Name, FullName: repo.FullName, Owner: repo.Owner,
			Private: repo.Private, DefaultBranch: repo.DefaultBranch, MasterBranch: repo.DefaultBranch,
			HTMLURL: repo.HTMLURL, CloneURL: repo.CloneURL, URL: repo.HTMLURL, Archived: repo.Archived,
			Topics: repo.Topics,
		},
		Pusher:       &github.CommitAuthor{Name: github.String(actor), Email: github.String(s.noreplyEmail(actor))},
		Sender:       s.userJSON(actor),
		Installation: s.installationForLocked(rm.Owner),
		Commits:      []*github.HeadCommit{},
	}
	if !ch.after.IsZero() {
		commits, _ := g.reachable(ch.after, ch.before)
		for i := len(commits) - 1; i >= 0 && len(ev.Commits) < 20; i-- {
			ev.Commits = append(ev.Commits, s.headCommitLocked(rm, g, commits[i]))
		}
		if c, err := g.commit(ch.after); err == nil {
			ev.HeadCommit = s.headCommitLocked(rm, g, c)
		}
	}
	return ev
}

func (s *Server) headCommitLocked(rm *repoMeta, g *gitRepo, c *object.Commit) *github.HeadCommit {
	sig := func(sg object.Signature) *github.CommitAuthor {
		a := &github.CommitAuthor{Name: github.String(sg.Name), Email: github.String(sg.Email)}
		if login, ok := s.loginForEmail(sg.Email); ok {
			a.Login = github.String(login)
		}
		return a
	}
	hc := &github.HeadCommit{
		ID: github.String(c.Hash.String()), TreeID: github.String(c.TreeHash.String()),
		Message: github.String(c.Message), Timestamp: &github.Timestamp{Time: c.Committer.When},
		URL:    github.String(s.URL + "/" + rm.fullName() + "/commit/" + c.Hash.String()),
		Author: sig(c.Author), Committer: sig(c.Committer), Distinct: github.Bool(true),
		Added: []string{}, Removed: []string{}, Modified: []string{},
	}
	var parentTree plumbing.Hash
	if len(c.ParentHashes) > 0 {
		if p, err := g.commit(c.ParentHashes[0]); err == nil {
			parentTree = p.TreeHash
		}
	}
	before, err1 := g.flatten(parentTree)
	after, err2 := g.flatten(c.TreeHash)
	if err1 == nil && err2 == nil {
		for _, p := range slices.Sorted(maps.Keys(after)) {
			if b, ok := before[p]; !ok {
				hc.Added = append(hc.Added, p)
			} else if b != after[p] {
				hc.Modified = append(hc.Modified, p)
			}
		}
		for _, p := range slices.Sorted(maps.Keys(before)) {
			if _, ok := after[p]; !ok {
				hc.Removed = append(hc.Removed, p)
			}
		}
	}
	return hc
}

func (s *Server) pullRequestEventLocked(rm *repoMeta, is *issue, action, actor string) *github.PullRequestEvent {
	pr := s.pullJSON(rm, is)
	return &github.PullRequestEvent{
		Action: github.String(action), Number: pr.Number, PullRequest: pr,
		Repo: s.repoJSON(rm), Sender: s.userJSON(actor), Installation: s.installationForLocked(rm.Owner),
	}
}

func (s *Server) installationEventLocked(action string, id int64) *github.InstallationEvent {
	in := s.st.Installations[id]
	ev := &github.InstallationEvent{Action: github.String(action), Sender: s.userJSON(DefaultUser)}
	if in != nil {
		ev.Installation = s.installationJSON(in)
		for _, k := range slices.Sorted(maps.Keys(s.st.Repos)) {
			if rm := s.st.Repos[k]; strings.EqualFold(rm.Owner, in.Account) {
				ev.Repositories = append(ev.Repositories, &github.Repository{ID: github.Int64(rm.ID),
					Name: github.String(rm.Name), FullName: github.String(rm.fullName()), Private: github.Bool(rm.Visibility != "public")})
			}
		}
	}
	return ev
}

// PushEvent builds the push webhook GitHub would send for branch having moved from before to
// its current commit (before "" means the branch was created).
func (s *Server) PushEvent(owner, repo, branch, before string) (*github.PushEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return nil, fmt.Errorf("repository %s/%s not found", owner, repo)
	}
	g, err := s.openRepoGit(rm)
	if err != nil {
		return nil, err
	}
	after, _ := g.branch(branch)
	ch := refChange{name: "refs/heads/" + branch, after: after}
	if before != "" {
		ch.before = plumbing.NewHash(before)
	}
	return s.pushEventLocked(rm, g, ch, s.botLogin()), nil
}

// PullRequestEvent builds the pull_request webhook for a pull request and an action
// (opened, synchronize, closed, reopened, edited).
func (s *Server) PullRequestEvent(owner, repo string, number int, action string) (*github.PullRequestEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil || rm.Issues[number] == nil || rm.Issues[number].Pull == nil {
		return nil, fmt.Errorf("pull request %s/%s#%d not found", owner, repo, number)
	}
	return s.pullRequestEventLocked(rm, rm.Issues[number], action, DefaultUser), nil
}

// InstallationEvent builds the installation webhook (created, deleted, ...) for the App's
// installation on account.
func (s *Server) InstallationEvent(account, action string) (*github.InstallationEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, account) {
			return s.installationEventLocked(action, in.ID), nil
		}
	}
	return nil, fmt.Errorf("no installation on %s", account)
}

// CheckRunEvent builds the check_run webhook for a check run (created, completed, rerequested).
func (s *Server) CheckRunEvent(id int64, action string) (*github.CheckRunEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.st.CheckRuns[id]
	if cr == nil {
		return nil, fmt.Errorf("check run %d not found", id)
	}
	rm := s.st.Repos[cr.Repo]
	return &github.CheckRunEvent{Action: github.String(action), CheckRun: s.checkRunJSON(rm, cr),
		Repo: s.repoJSON(rm), Sender: s.userJSON(s.botLogin()), Installation: s.installationForLocked(rm.Owner)}, nil
}
