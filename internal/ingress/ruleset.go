package ingress

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// RulesetHandler: a ruleset was created, edited or deleted (the repository_ruleset event, the
// ruleset counterpart of branch_protection_rule), e.g. fleetbot's ruleset deleted by hand.
//
//   - A repository's ruleset (the payload names the repository): reconcile that repo, reading
//     its access afresh, as for branch_protection_rule; the service ignores, at info level, a
//     repo that is not in the fleet.
//   - An organization's ruleset (no repository in the payload): only fleetbot's own org ruleset
//     (named app.RulesetName, or renamed from it) concerns the fleet; it targets every fleet
//     repo of the org through their custom properties, so the whole fleet is reconciled: one
//     apply (it coalesces with any other and absorbs the drifts waiting), which reads the org
//     ruleset once and repairs it with one write. Other org rulesets are not fleetbot's.
//
// https://docs.github.com/webhooks/webhook-events-and-payloads#repository_ruleset
type RulesetHandler struct{ *base }

// Handles returns "repository_ruleset".
func (h *RulesetHandler) Handles() []string { return []string{"repository_ruleset"} }

// rulesetEvent is what RulesetHandler reads of a repository_ruleset payload. GitHub's schema
// (webhook-repository-ruleset-created, -edited, -deleted in its REST description) requires
// action, repository_ruleset (with id, name, source and enforcement) and sender; repository is
// present for a repository's ruleset, organization for an org's.
type rulesetEvent struct {
	Action  string `json:"action"`
	Ruleset *struct {
		ID         int64  `json:"id"`
		Name       string `json:"name"`
		SourceType string `json:"source_type"`
		Source     string `json:"source"`
	} `json:"repository_ruleset"`
	Changes *struct {
		Name *struct {
			From string `json:"from"`
		} `json:"name"`
	} `json:"changes"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Organization *struct {
		Login string `json:"login"`
	} `json:"organization"`
	Sender *gh.User `json:"sender"`
}

// rulesetActions are the actions GitHub documents for repository_ruleset; others are ignored.
var rulesetActions = map[string]bool{"created": true, "edited": true, "deleted": true}

// fullNameRe is a repository's "owner/name" as GitHub allows them: an account login (letters,
// digits, single hyphens inside, at most 39) and a repository name (letters, digits, '.', '-',
// '_', at most 100, not "." or "..").
var fullNameRe = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?/[A-Za-z0-9._-]{1,100}$`)

// loginRe is an account login (an organization's).
var loginRe = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$`)

// check refuses a payload GitHub would not send: without the properties its schema requires,
// or naming a repository or organization no GitHub account can have.
func (ev *rulesetEvent) check() error {
	switch {
	case ev.Action == "":
		return errors.New("no action")
	case ev.Ruleset == nil:
		return errors.New("no repository_ruleset object (GitHub's schema requires it)")
	case ev.Ruleset.ID <= 0 || ev.Ruleset.Name == "":
		return fmt.Errorf("repository_ruleset without an id or a name (id %d, name %q)", ev.Ruleset.ID, ev.Ruleset.Name)
	case ev.Sender == nil:
		return errors.New("no sender (GitHub's schema requires it)")
	}
	if ev.Repository != nil {
		if _, name, ok := strings.Cut(ev.Repository.FullName, "/"); !ok || name == "." || name == ".." || !fullNameRe.MatchString(ev.Repository.FullName) {
			return fmt.Errorf("repository.full_name %q is not a GitHub owner/name", ev.Repository.FullName)
		}
		return nil
	}
	if ev.Organization == nil || !loginRe.MatchString(ev.Organization.Login) {
		return errors.New("neither a repository nor an organization login: whose ruleset it is is unknown")
	}
	return nil
}

// fleetbots reports whether the ruleset is, or was until this edit, fleetbot's (app.RulesetName).
func (ev *rulesetEvent) fleetbots() bool {
	if ev.Ruleset.Name == app.RulesetName {
		return true
	}
	return ev.Changes != nil && ev.Changes.Name != nil && ev.Changes.Name.From == app.RulesetName
}

// Handle queues a drift job (a repository's ruleset) or an apply (fleetbot's org ruleset).
func (h *RulesetHandler) Handle(_ context.Context, d Delivery) (string, error) {
	var ev rulesetEvent
	if err := decode(d, &ev); err != nil {
		return "", err
	}
	if err := ev.check(); err != nil {
		return "", fmt.Errorf("%w: repository_ruleset event: %v", ErrBadPayload, err)
	}
	where := ""
	if ev.Repository != nil {
		where = ev.Repository.FullName
	} else {
		where = ev.Organization.Login
	}
	reason := "repository_ruleset." + ev.Action
	switch {
	case !rulesetActions[ev.Action]:
		return h.ignore(d, where, "ruleset "+ev.Action)
	case h.isSelf(ev.Sender):
		return h.ignore(d, where, "caused by fleetbot")
	case ev.Repository != nil && h.isControl(where):
		return h.ignore(d, where, "the control repo")
	case ev.Repository != nil:
		return h.queue(d, webhook.Job{Kind: webhook.KindDrift, Repo: where, Reason: reason, Access: true})
	case !ev.fleetbots():
		return h.ignore(d, where, fmt.Sprintf("org ruleset %q is not fleetbot's (%s)", ev.Ruleset.Name, app.RulesetName))
	}
	return h.queue(d, webhook.Job{Kind: webhook.KindApply, Repo: h.cfg.Control, Reason: reason})
}
