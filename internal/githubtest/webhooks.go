package githubtest

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-github/v62/github"
)

// pendingEvent is a webhook queued under the lock and delivered after the request: an event's
// payload, or a redelivery of an attempt (its GUID, bytes, URL and secret).
type pendingEvent struct {
	event   string
	payload any

	redelivery  bool
	guid        string
	body        []byte
	url, secret string
}

// queueEvent builds (under Server.mu) and queues a webhook, when a hook URL is configured and
// the App subscribes to the event (its manifest's default_events; installation events go to
// every App): "You can subscribe your GitHub App to webhook events"; GitHub sends nothing else.
// https://docs.github.com/apps/creating-github-apps/registering-a-github-app/using-webhooks-with-github-apps
func (s *Server) queueEvent(event string, build func() map[string]any) {
	if s.cfg.hookURL == "" && s.cfg.hookURLFile == "" {
		return
	}
	if event != "installation" && event != "installation_repositories" && !slices.Contains(s.appEvents(), event) {
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

// flushEvents hands the webhooks queued by a request to the delivery loop, which delivers
// them in the background one at a time, in the order the requests were answered (a request's
// events before the next one's, as GitHub's come for one repository).
func (s *Server) flushEvents() {
	s.mu.Lock()
	events := s.events
	s.events = nil
	s.mu.Unlock()
	s.enqueue(events)
}

// enqueue hands events to the delivery loop, starting it when it is not running.
func (s *Server) enqueue(events []pendingEvent) {
	if len(events) == 0 {
		return
	}
	s.outMu.Lock()
	s.outbox = append(s.outbox, events...)
	start := !s.delivering
	s.delivering = true
	s.outMu.Unlock()
	if start {
		s.hooks.Add(1)
		go s.deliverLoop()
	}
}

// WaitWebhooks waits until every webhook queued so far was delivered (or failed to be), without
// stopping the server (Close cancels the deliveries still in flight).
func (s *Server) WaitWebhooks() { s.hooks.Wait() }

// deliverLoop delivers the outbox until it is empty.
func (s *Server) deliverLoop() {
	defer s.hooks.Done()
	for {
		s.outMu.Lock()
		if len(s.outbox) == 0 {
			s.delivering = false
			s.outMu.Unlock()
			return
		}
		e := s.outbox[0]
		s.outbox = s.outbox[1:]
		s.outMu.Unlock()
		url := s.hookTarget()
		if url == "" && e.redelivery {
			url = e.url // delivered with Deliver to a URL of the test's
		}
		if url == "" {
			s.cfg.logger.Info("no webhook URL yet; event dropped", "event", e.event, "file", s.cfg.hookURLFile)
			continue
		}
		// GitHub.com gives a delivery 10 seconds to be answered.
		ctx, cancel := context.WithTimeout(s.closeCtx, 10*time.Second)
		var err error
		if e.redelivery {
			secret := s.cfg.hookSecret
			if s.hookTarget() == "" {
				secret = e.secret
			}
			err = s.send(ctx, url, secret, e.event, e.guid, e.body, true)
		} else {
			err = s.Deliver(ctx, url, s.cfg.hookSecret, e.event, e.payload)
		}
		if err != nil {
			s.cfg.logger.Warn("delivering webhook", "event", e.event, "err", err)
		}
		cancel()
	}
}

// Sign returns the X-Hub-Signature-256 value GitHub sends for body: "sha256=" + hex HMAC-SHA256.
// https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// SignSHA1 returns the X-Hub-Signature value GitHub sends beside X-Hub-Signature-256, "for
// compatibility with existing integrations": "sha1=" + hex HMAC-SHA1.
// https://docs.github.com/webhooks/webhook-events-and-payloads#delivery-headers
func SignSHA1(secret string, body []byte) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write(body)
	return "sha1=" + hex.EncodeToString(m.Sum(nil))
}

// Deliver POSTs payload (JSON-encoded) to url as GitHub delivers a webhook: signed with
// X-Hub-Signature-256 and X-Hub-Signature (SHA-1), with X-GitHub-Event, a new X-GitHub-Delivery
// GUID and a GitHub-Hookshot user agent, recorded in the delivery log (Deliveries, and the
// App's GET /app/hook/deliveries). A response outside 2xx is an error.
func (s *Server) Deliver(ctx context.Context, url, secret, event string, payload any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encoding %s webhook: %w", event, err)
	}
	return s.send(ctx, url, secret, event, deliveryID(), body, false)
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

// PushEvent builds the push webhook GitHub would send for branch having moved from before to
// its current commit (before "" means the branch was created), by the App's bot.
func (s *Server) PushEvent(owner, repo, branch, before string) (*Payload, error) {
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
	return &Payload{s.pushPayloadLocked(rm, g, ch, s.botLogin())}, nil
}

// PullRequestEvent builds the pull_request webhook for a pull request and an action
// (opened, synchronize, closed, reopened, edited), by DefaultUser.
func (s *Server) PullRequestEvent(owner, repo string, number int, action string) (*Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil || rm.Issues[number] == nil || rm.Issues[number].Pull == nil {
		return nil, fmt.Errorf("pull request %s/%s#%d not found", owner, repo, number)
	}
	is := rm.Issues[number]
	ch := pullChange{before: is.Pull.HeadSHA, after: is.Pull.HeadSHA}
	if action == "edited" {
		ch.title = &is.Title
	}
	return &Payload{s.pullRequestPayloadLocked(rm, is, action, DefaultUser, ch)}, nil
}

// InstallationEvent builds the installation webhook (created, deleted, ...) for the App's
// installation on account.
func (s *Server) InstallationEvent(account, action string) (*Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.st.Installations {
		if strings.EqualFold(in.Account, account) {
			return &Payload{s.installationPayloadLocked(action, in.ID)}, nil
		}
	}
	return nil, fmt.Errorf("no installation on %s", account)
}

// CheckRunEvent builds the check_run webhook for a check run (created, completed, rerequested),
// sent by the App's bot.
func (s *Server) CheckRunEvent(id int64, action string) (*Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.st.CheckRuns[id]
	if cr == nil {
		return nil, fmt.Errorf("check run %d not found", id)
	}
	return &Payload{s.checkRunPayloadLocked(s.st.Repos[cr.Repo], cr, action, s.botLogin())}, nil
}

// CheckSuiteEvent builds the check_suite webhook (completed, requested, rerequested) for the
// suite of a check run (the fake keeps one suite per check run).
func (s *Server) CheckSuiteEvent(id int64, action string) (*Payload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.st.CheckRuns[id]
	if cr == nil {
		return nil, fmt.Errorf("check run %d not found", id)
	}
	return &Payload{s.checkSuitePayloadLocked(s.st.Repos[cr.Repo], cr, action, s.botLogin())}, nil
}
