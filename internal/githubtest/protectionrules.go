package githubtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// protectionRequired are the properties every PUT of a branch protection must carry (each may
// be null): "required_status_checks", "enforce_admins", "required_pull_request_reviews" and
// "restrictions". GitHub answers a body without one 422 `Invalid request.\n\n"restrictions"
// wasn't supplied.`
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
var protectionRequired = []string{"required_status_checks", "enforce_admins", "required_pull_request_reviews", "restrictions"}

// invalidRequest is GitHub's 422 for a body its JSON schema refuses.
func invalidRequest(detail string) *httpError {
	return &httpError{status: http.StatusUnprocessableEntity, message: "Invalid request.\n\n" + detail}
}

// notSupplied words GitHub's schema error for missing properties.
func notSupplied(missing []string) *httpError {
	quoted := make([]string, len(missing))
	for i, m := range missing {
		quoted[i] = `"` + m + `"`
	}
	if len(missing) == 1 {
		return invalidRequest(quoted[0] + " wasn't supplied.")
	}
	return invalidRequest(strings.Join(quoted, ", ") + " weren't supplied.")
}

// protectionRequest is the body of PUT /repos/{owner}/{repo}/branches/{branch}/protection.
type protectionRequest struct {
	RequiredStatusChecks *struct {
		Strict   bool      `json:"strict"`
		Contexts *[]string `json:"contexts"`
		Checks   *[]struct {
			Context string `json:"context"`
			AppID   *int64 `json:"app_id"`
		} `json:"checks"`
	} `json:"required_status_checks"`
	RequiredPullRequestReviews *struct {
		DismissStaleReviews          bool `json:"dismiss_stale_reviews"`
		RequireCodeOwnerReviews      bool `json:"require_code_owner_reviews"`
		RequiredApprovingReviewCount int  `json:"required_approving_review_count"`
	} `json:"required_pull_request_reviews"`
	EnforceAdmins         *bool `json:"enforce_admins"`
	RequiredLinearHistory *bool `json:"required_linear_history"`
	AllowForcePushes      *bool `json:"allow_force_pushes"`
	AllowDeletions        *bool `json:"allow_deletions"`
}

// parseProtection reads a PUT body into the protection it sets, refusing what GitHub refuses:
// a missing required property (protectionRequired), a required_status_checks without strict
// or with both or neither of contexts and checks (its schema's oneOf; checks, each a context
// and the App that must provide it, replaces the deprecated contexts), restrictions without
// users and teams, and more than 6 required approving reviews.
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func parseProtection(data []byte) (*protection, *httpError) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, errBadRequest
	}
	var missing []string
	for _, k := range protectionRequired {
		if _, ok := raw[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, notSupplied(missing)
	}
	if herr := requireKeys(raw["required_status_checks"], "strict"); herr != nil {
		return nil, herr
	}
	if herr := requireKeys(raw["restrictions"], "users", "teams"); herr != nil {
		return nil, herr
	}
	var req protectionRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, errBadRequest
	}
	p := &protection{}
	if rc := req.RequiredStatusChecks; rc != nil {
		// GitHub's words for both and for neither (the schema errors of its oneOf; their last
		// line, which quotes the body, is left out): google/go-github#2976, ossf/allstar#155.
		switch {
		case rc.Contexts != nil && rc.Checks != nil:
			return nil, invalidRequest("No subschema in \"anyOf\" matched.\nMore than one subschema in \"oneOf\" matched.\nNot all subschemas of \"allOf\" matched.")
		case rc.Contexts == nil && rc.Checks == nil:
			return nil, invalidRequest("No subschema in \"anyOf\" matched.\nNo subschema in \"oneOf\" matched.\nNot all subschemas of \"allOf\" matched.")
		}
		p.HasStatusChecks, p.StrictStatusChecks, p.RequiredStatusChecks = true, rc.Strict, []string{}
		if rc.Contexts != nil {
			p.RequiredStatusChecks = append(p.RequiredStatusChecks, *rc.Contexts...)
		}
		if rc.Checks != nil {
			for _, c := range *rc.Checks {
				if c.Context == "" {
					return nil, invalidRequest(`"context" wasn't supplied.`)
				}
				if !slices.Contains(p.RequiredStatusChecks, c.Context) {
					p.RequiredStatusChecks = append(p.RequiredStatusChecks, c.Context)
				}
				// app_id -1 explicitly allows any App; omitted, the check is bound when the
				// protection is stored (bindRequiredChecksLocked).
				if c.AppID != nil {
					if p.RequiredCheckApps == nil {
						p.RequiredCheckApps = map[string]int64{}
					}
					p.RequiredCheckApps[c.Context] = max(*c.AppID, anyApp)
				}
			}
		}
	}
	if rv := req.RequiredPullRequestReviews; rv != nil {
		if rv.RequiredApprovingReviewCount < 0 || rv.RequiredApprovingReviewCount > 6 {
			return nil, validationFailed("Protection", "required_approving_review_count", "invalid")
		}
		p.RequirePRReviews, p.DismissStaleReviews = true, rv.DismissStaleReviews
		p.RequireCodeOwnerReviews, p.RequiredApprovals = rv.RequireCodeOwnerReviews, rv.RequiredApprovingReviewCount
	}
	deref := func(b *bool) bool { return b != nil && *b }
	p.EnforceAdmins, p.RequireLinearHistory = deref(req.EnforceAdmins), deref(req.RequiredLinearHistory)
	p.AllowForcePushes, p.AllowDeletions = deref(req.AllowForcePushes), deref(req.AllowDeletions)
	return p, nil
}

// requireKeys refuses an object (not null) that lacks one of keys.
func requireKeys(raw json.RawMessage, keys ...string) *httpError {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil // null, or a type the decoder refuses later
	}
	var missing []string
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return notSupplied(missing)
	}
	return nil
}

// requiredChecksJSON is the checks list of a protection's answer: each context with the App
// that must provide it (null: any).
func requiredChecksJSON(p *protection) []map[string]any {
	checks := []map[string]any{}
	for _, c := range p.RequiredStatusChecks {
		checks = append(checks, map[string]any{"context": c, "app_id": p.checkApp(c)})
	}
	return checks
}
