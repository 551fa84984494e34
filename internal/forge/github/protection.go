package github

import (
	"errors"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// upgradePrefix starts GitHub's answer to a branch-protection request on a private repository
// of an organization on the free plan: "Upgrade to GitHub Pro or make this repository public
// to enable this feature." (403).
// https://docs.github.com/get-started/learning-about-github/githubs-plans
const upgradePrefix = "Upgrade to GitHub Pro or make this repository public"

// protectionUnavailable reports GitHub's message when err says the repository's plan has no
// branch protection: nothing fleetbot can retry or fix by itself.
func protectionUnavailable(err error) (string, bool) {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden &&
		strings.HasPrefix(er.Message, upgradePrefix) {
		return er.Message, true
	}
	return "", false
}

// ProtectionUnavailable implements reconcile.ProtectionReporter: GitHub's reason when this run
// could not protect the default branch of owner/repo because of the organization's plan ("" if
// it could), forgotten once read.
func (f *Forge) ProtectionUnavailable(owner, repo string) string {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	reason := e.protectionUnavailable
	e.protectionUnavailable = ""
	return reason
}
