package githubtest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rulesets (repository and organization branch rulesets) and custom properties, as GitHub's
// REST API describes them, and rulesets enforced on merges like a branch protection.
// https://docs.github.com/rest/repos/rules
// https://docs.github.com/rest/orgs/rules
// https://docs.github.com/rest/repos/custom-properties
// https://docs.github.com/rest/orgs/custom-properties
// "Rulesets work alongside any branch protection rules": the rules of every active ruleset
// that targets a branch and of its protection all apply, the most restrictive winning.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets#about-rule-layering

// ruleset is a stored ruleset, in GitHub's wire shape.
type ruleset struct {
	ID           int64          `json:"id"`
	Name         string         `json:"name"`
	Target       string         `json:"target,omitempty"`
	Enforcement  string         `json:"enforcement"`
	BypassActors []rulesetActor `json:"bypass_actors,omitempty"`
	Conditions   *rulesetCond   `json:"conditions,omitempty"`
	Rules        []rulesetRule  `json:"rules,omitempty"`
	CreatedAt    time.Time      `json:"created_at"`
	UpdatedAt    time.Time      `json:"updated_at"`
}

type rulesetActor struct {
	ActorID    *int64 `json:"actor_id,omitempty"`
	ActorType  string `json:"actor_type"`
	BypassMode string `json:"bypass_mode,omitempty"`
}

type rulesetCond struct {
	RefName            *refNameCond  `json:"ref_name,omitempty"`
	RepositoryProperty *propertyCond `json:"repository_property,omitempty"`
}

type refNameCond struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

type propertyCond struct {
	Include []propertySpec `json:"include"`
	Exclude []propertySpec `json:"exclude"`
}

type propertySpec struct {
	Name           string   `json:"name"`
	PropertyValues []string `json:"property_values"`
}

type rulesetRule struct {
	Type       string         `json:"type"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// propertyDef is an organization's custom property definition.
type propertyDef struct {
	PropertyName  string   `json:"property_name"`
	ValueType     string   `json:"value_type"`
	Required      bool     `json:"required,omitempty"`
	Description   string   `json:"description,omitempty"`
	AllowedValues []string `json:"allowed_values,omitempty"`
}

// WithoutRulesets makes the server a GitHub Enterprise Server from before rulesets: every
// ruleset route answers 404.
func WithoutRulesets() Option { return func(c *config) { c.noRulesets = true } }

// rulesetRefusal is the error a ruleset request on owner's repo rm (nil for the org's) gets
// before anything else: 404 without rulesets, GitHub Free's 403 on a private repository (and
// on the org's rulesets, which the free plan lacks).
func (s *Server) rulesetRefusal(owner string, rm *repoMeta, method string) *httpError {
	if s.cfg.noRulesets {
		return errNotFound
	}
	a := s.st.Accounts[strings.ToLower(owner)]
	if a != nil && a.Plan == PlanFree && (rm == nil || rm.Visibility != "public") {
		return &httpError{status: http.StatusForbidden, message: upgradeMessage}
	}
	return nil
}

func (s *Server) rulesetJSON(rs *ruleset, source string, org bool, summary bool) map[string]any {
	sourceType, self := "Repository", s.APIURL()+"repos/"+source+"/rulesets/"+strconv.FormatInt(rs.ID, 10)
	if org {
		sourceType, self = "Organization", s.APIURL()+"orgs/"+source+"/rulesets/"+strconv.FormatInt(rs.ID, 10)
	}
	out := map[string]any{
		"id": rs.ID, "name": rs.Name, "source_type": sourceType, "source": source, "enforcement": rs.Enforcement,
		"node_id":    nodeID("RepositoryRuleset", rs.ID),
		"_links":     map[string]any{"self": map[string]string{"href": self}},
		"created_at": rs.CreatedAt.UTC().Format(time.RFC3339), "updated_at": rs.UpdatedAt.UTC().Format(time.RFC3339),
	}
	if summary {
		return out
	}
	target := rs.Target
	if target == "" {
		target = "branch"
	}
	out["target"] = target
	actors := rs.BypassActors
	if actors == nil {
		actors = []rulesetActor{}
	}
	out["bypass_actors"] = actors
	out["current_user_can_bypass"] = "never"
	if rs.Conditions != nil {
		out["conditions"] = rs.Conditions
	}
	rules := rs.Rules
	if rules == nil {
		rules = []rulesetRule{}
	}
	out["rules"] = rules
	return out
}

// rulesetRequest is the body of a ruleset's create or update.
type rulesetRequest struct {
	Name         *string         `json:"name"`
	Target       *string         `json:"target"`
	Enforcement  *string         `json:"enforcement"`
	BypassActors *[]rulesetActor `json:"bypass_actors"`
	Conditions   *rulesetCond    `json:"conditions"`
	Rules        *[]rulesetRule  `json:"rules"`
}

func (req rulesetRequest) apply(rs *ruleset) *httpError {
	if req.Name != nil {
		rs.Name = *req.Name
	}
	if req.Target != nil {
		rs.Target = *req.Target
	}
	if req.Enforcement != nil {
		rs.Enforcement = *req.Enforcement
	}
	if req.BypassActors != nil {
		rs.BypassActors = *req.BypassActors
	}
	if req.Conditions != nil {
		rs.Conditions = req.Conditions
	}
	if req.Rules != nil {
		rs.Rules = *req.Rules
	}
	switch {
	case rs.Name == "":
		return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed", errors: []fieldError{{Resource: "Ruleset", Field: "name", Code: "missing_field"}}}
	case rs.Enforcement != "active" && rs.Enforcement != "evaluate" && rs.Enforcement != "disabled":
		return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed", errors: []fieldError{{Resource: "Ruleset", Field: "enforcement", Code: "invalid"}}}
	}
	return nil
}

// rulesetsOf returns the rulesets of a repo (rm) or of the org (rm nil), for writing.
func (s *Server) rulesetsOf(owner string, rm *repoMeta) *[]*ruleset {
	if rm != nil {
		return &rm.Rulesets
	}
	return &s.st.Accounts[strings.ToLower(owner)].Rulesets
}

// rulesetTarget resolves the owner and repo (nil for an org route) of a ruleset request.
func (s *Server) rulesetTarget(r *http.Request) (string, *repoMeta, error) {
	if org := r.PathValue("org"); org != "" {
		a := s.st.Accounts[strings.ToLower(org)]
		if a == nil || a.Type != "Organization" {
			return "", nil, errNotFound
		}
		return a.Login, nil, nil
	}
	rm, err := s.repoFromReq(r)
	if err != nil {
		return "", nil, err
	}
	return rm.Owner, rm, nil
}

// handleRulesets lists (GET) or creates (POST) the rulesets of a repo or an org. A repo's list
// includes the org's that apply to it, unless includes_parents=false.
func (s *Server) handleRulesets(w http.ResponseWriter, r *http.Request) {
	owner, rm, err := s.rulesetTarget(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if herr := s.rulesetRefusal(owner, rm, r.Method); herr != nil {
		writeErr(w, herr)
		return
	}
	source := owner
	if rm != nil {
		source = rm.Owner + "/" + rm.Name
	}
	if r.Method == http.MethodGet {
		out := []map[string]any{}
		for _, rs := range *s.rulesetsOf(owner, rm) {
			out = append(out, s.rulesetJSON(rs, source, rm == nil, true))
		}
		if rm != nil && r.URL.Query().Get("includes_parents") != "false" {
			for _, rs := range s.st.Accounts[strings.ToLower(owner)].Rulesets {
				if s.orgRulesetTargets(rs, rm) {
					out = append(out, s.rulesetJSON(rs, owner, true, true))
				}
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	var req rulesetRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	now := s.clock.Now()
	rs := &ruleset{ID: s.st.nextID(), CreatedAt: now, UpdatedAt: now}
	if herr := req.apply(rs); herr != nil {
		writeErr(w, herr)
		return
	}
	list := s.rulesetsOf(owner, rm)
	for _, o := range *list {
		if o.Name == rs.Name {
			writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
				errors: []fieldError{{Resource: "Ruleset", Field: "name", Code: "already_exists", Message: "Name must be unique"}}})
			return
		}
	}
	*list = append(*list, rs)
	s.queueRulesetEvent(owner, rm, rs, "created", principalOf(r).login)
	writeJSON(w, http.StatusCreated, s.rulesetJSON(rs, source, rm == nil, false))
}

// handleRuleset reads, updates or deletes one ruleset of a repo or an org.
func (s *Server) handleRuleset(w http.ResponseWriter, r *http.Request) {
	owner, rm, err := s.rulesetTarget(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if herr := s.rulesetRefusal(owner, rm, r.Method); herr != nil {
		writeErr(w, herr)
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("ruleset_id"), 10, 64)
	list := s.rulesetsOf(owner, rm)
	i := slices.IndexFunc(*list, func(rs *ruleset) bool { return rs.ID == id })
	source := owner
	if rm != nil {
		source = rm.Owner + "/" + rm.Name
	}
	if i < 0 {
		writeErr(w, errNotFound)
		return
	}
	rs := (*list)[i]
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, s.rulesetJSON(rs, source, rm == nil, false))
	case http.MethodDelete:
		*list = slices.Delete(*list, i, i+1)
		s.queueRulesetEvent(owner, rm, rs, "deleted", principalOf(r).login)
		w.WriteHeader(http.StatusNoContent)
	default:
		var req rulesetRequest
		if err := decodeBody(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		next := *rs
		if herr := req.apply(&next); herr != nil {
			writeErr(w, herr)
			return
		}
		next.UpdatedAt = s.clock.Now()
		*rs = next
		s.queueRulesetEvent(owner, rm, rs, "edited", principalOf(r).login)
		writeJSON(w, http.StatusOK, s.rulesetJSON(rs, source, rm == nil, false))
	}
}

// orgRulesetTargets: an org ruleset applies to a repo whose custom properties match every
// property its repository_property condition includes and none it excludes (a ruleset with no
// repository condition targets no repo here: the fake knows only property targeting).
func (s *Server) orgRulesetTargets(rs *ruleset, rm *repoMeta) bool {
	if rs.Conditions == nil || rs.Conditions.RepositoryProperty == nil {
		return false
	}
	for _, p := range rs.Conditions.RepositoryProperty.Include {
		if !slices.Contains(p.PropertyValues, rm.Properties[p.Name]) {
			return false
		}
	}
	for _, p := range rs.Conditions.RepositoryProperty.Exclude {
		if slices.Contains(p.PropertyValues, rm.Properties[p.Name]) {
			return false
		}
	}
	return true
}

// refTargets: the ruleset's ref_name condition covers branch of rm (~ALL, ~DEFAULT_BRANCH or
// refs/heads/<branch>, and not excluded).
func refTargets(rs *ruleset, rm *repoMeta, branch string) bool {
	if rs.Conditions == nil || rs.Conditions.RefName == nil {
		return false
	}
	match := func(list []string) bool {
		for _, p := range list {
			if p == "~ALL" || (p == "~DEFAULT_BRANCH" && branch == rm.DefaultBranch) || p == "refs/heads/"+branch {
				return true
			}
		}
		return false
	}
	return match(rs.Conditions.RefName.Include) && !match(rs.Conditions.RefName.Exclude)
}

// activeRulesetsLocked are the active rulesets that target branch of rm: its own and its org's.
func (s *Server) activeRulesetsLocked(rm *repoMeta, branch string) []*ruleset {
	if s.cfg.noRulesets {
		return nil
	}
	if a := s.st.Accounts[strings.ToLower(rm.Owner)]; a != nil && a.Plan == PlanFree && rm.Visibility != "public" {
		return nil // not enforced on GitHub Free's private repositories
	}
	var out []*ruleset
	for _, rs := range rm.Rulesets {
		if rs.Enforcement == "active" && refTargets(rs, rm, branch) {
			out = append(out, rs)
		}
	}
	if a := s.st.Accounts[strings.ToLower(rm.Owner)]; a != nil {
		for _, rs := range a.Rulesets {
			if rs.Enforcement == "active" && s.orgRulesetTargets(rs, rm) && refTargets(rs, rm, branch) {
				out = append(out, rs)
			}
		}
	}
	return out
}

// bypassesRuleset: who is one of the ruleset's bypass actors: a repository role at or above
// the actor's (RepositoryRole 2 maintain, 4 write, 5 admin), a member of the team, the GitHub
// App (Integration) whose installation acts, or an organization owner (OrganizationAdmin).
// https://docs.github.com/rest/repos/rules#create-a-repository-ruleset
func (s *Server) bypassesRuleset(rm *repoMeta, rs *ruleset, who principal) bool {
	roles := map[int64]string{2: "maintain", 4: "push", 5: "admin"}
	for _, a := range rs.BypassActors {
		var id int64
		if a.ActorID != nil {
			id = *a.ActorID
		}
		switch a.ActorType {
		case "OrganizationAdmin":
			if org := s.st.Accounts[strings.ToLower(rm.Owner)]; who.kind == "user" && org != nil && org.Members[strings.ToLower(who.login)] == "admin" {
				return true
			}
		case "RepositoryRole":
			if who.kind == "user" && permRank[s.effectivePermission(rm, who.login)] >= permRank[roles[id]] && roles[id] != "" {
				return true
			}
		case "Team":
			for _, t := range s.orgTeams(rm.Owner) {
				if t.ID == id && who.kind == "user" && t.Members[strings.ToLower(who.login)] != "" {
					return true
				}
			}
		case "Integration":
			if who.kind == "installation" && s.cfg.appID == id {
				return true
			}
		}
	}
	return false
}

// rulesetBlockersLocked lists, in GitHub's words, what the active rulesets targeting the base
// branch still require of a pull request merged by who: the pull_request rule's reviews and
// the required_status_checks rule's checks, as a branch protection's.
func (s *Server) rulesetBlockersLocked(rm *repoMeta, is *issue, who principal) []string {
	var out []string
	for _, rs := range s.activeRulesetsLocked(rm, is.Pull.Base) {
		if s.bypassesRuleset(rm, rs, who) {
			continue
		}
		p := &protection{}
		for _, rule := range rs.Rules {
			switch rule.Type {
			case "pull_request":
				p.RequirePRReviews = true
				p.RequiredApprovals = intParam(rule.Parameters, "required_approving_review_count")
				p.RequireCodeOwnerReviews = boolParam(rule.Parameters, "require_code_owner_review")
				p.DismissStaleReviews = boolParam(rule.Parameters, "dismiss_stale_reviews_on_push")
			case "required_status_checks":
				checks, _ := rule.Parameters["required_status_checks"].([]any)
				for _, c := range checks {
					m, _ := c.(map[string]any)
					ctx, _ := m["context"].(string)
					p.RequiredStatusChecks = append(p.RequiredStatusChecks, ctx)
					if id, ok := m["integration_id"].(float64); ok {
						if p.RequiredCheckApps == nil {
							p.RequiredCheckApps = map[string]int64{}
						}
						p.RequiredCheckApps[ctx] = int64(id)
					}
				}
			}
		}
		out = append(out, s.protectionBlockersLocked(rm, is, p)...)
	}
	return out
}

func intParam(m map[string]any, k string) int {
	v, _ := m[k].(float64)
	return int(v)
}

func boolParam(m map[string]any, k string) bool {
	v, _ := m[k].(bool)
	return v
}

// handlePropertySchema reads (GET) or creates and updates (PATCH) an org's custom property
// definitions.
func (s *Server) handlePropertySchema(w http.ResponseWriter, r *http.Request) {
	a := s.st.Accounts[strings.ToLower(r.PathValue("org"))]
	if a == nil || a.Type != "Organization" {
		writeErr(w, errNotFound)
		return
	}
	if r.Method == http.MethodPatch {
		var req struct {
			Properties []propertyDef `json:"properties"`
		}
		if err := decodeBody(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		for _, d := range req.Properties {
			if d.PropertyName == "" || (d.ValueType != "string" && d.ValueType != "single_select" && d.ValueType != "multi_select" && d.ValueType != "true_false" && d.ValueType != "url") {
				writeErr(w, &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
					errors: []fieldError{{Resource: "CustomProperty", Field: "value_type", Code: "invalid"}}})
				return
			}
			i := slices.IndexFunc(a.PropertySchema, func(o propertyDef) bool { return o.PropertyName == d.PropertyName })
			if i >= 0 {
				a.PropertySchema[i] = d
			} else {
				a.PropertySchema = append(a.PropertySchema, d)
			}
		}
	}
	out := []map[string]any{}
	for _, d := range a.PropertySchema {
		out = append(out, s.propertyDefJSON(a, d))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) propertyDefJSON(a *account, d propertyDef) map[string]any {
	out := map[string]any{"property_name": d.PropertyName, "value_type": d.ValueType, "required": d.Required,
		"url": s.APIURL() + "orgs/" + a.Login + "/properties/schema/" + d.PropertyName, "source_type": "organization",
		"values_editable_by": "org_actors"}
	if d.Description != "" {
		out["description"] = d.Description
	}
	if d.AllowedValues != nil {
		out["allowed_values"] = d.AllowedValues
	}
	return out
}

// setPropertiesLocked sets a repo's custom property values: each must be defined by the org
// (and, for a single_select, one of its allowed values); a null value removes it.
func (s *Server) setPropertiesLocked(rm *repoMeta, vals map[string]any) *httpError {
	a := s.st.Accounts[strings.ToLower(rm.Owner)]
	next := map[string]string{}
	for k, v := range rm.Properties {
		next[k] = v
	}
	for name, v := range vals {
		var def *propertyDef
		if a != nil {
			for i := range a.PropertySchema {
				if a.PropertySchema[i].PropertyName == name {
					def = &a.PropertySchema[i]
				}
			}
		}
		if def == nil {
			return &httpError{status: http.StatusUnprocessableEntity, message: fmt.Sprintf("Custom property %s is not defined for this organization", name)}
		}
		if v == nil {
			delete(next, name)
			continue
		}
		str, ok := v.(string)
		if !ok || (def.ValueType == "single_select" && !slices.Contains(def.AllowedValues, str)) {
			return &httpError{status: http.StatusUnprocessableEntity, message: fmt.Sprintf("Invalid value for custom property %s", name)}
		}
		next[name] = str
	}
	rm.Properties = next
	return nil
}

// handlePropertyValues reads (GET) or sets (PATCH) a repo's custom property values.
func (s *Server) handlePropertyValues(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if r.Method == http.MethodPatch {
		var req struct {
			Properties []struct {
				PropertyName string `json:"property_name"`
				Value        any    `json:"value"`
			} `json:"properties"`
		}
		if err := decodeBody(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		vals := map[string]any{}
		for _, p := range req.Properties {
			vals[p.PropertyName] = p.Value
		}
		if herr := s.setPropertiesLocked(rm, vals); herr != nil {
			writeErr(w, herr)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	out := []map[string]any{}
	names := make([]string, 0, len(rm.Properties))
	for k := range rm.Properties {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		out = append(out, map[string]any{"property_name": k, "value": rm.Properties[k]})
	}
	writeJSON(w, http.StatusOK, out)
}

// queueRulesetEvent queues the repository_ruleset event of a ruleset created, edited or
// deleted through the API by sender: GitHub sends it for a repository's ruleset (with the
// repository) and for an organization's (without one). The ruleset is the REST answer's
// (repository-ruleset); an edit's optional "changes" is left out.
// https://docs.github.com/webhooks/webhook-events-and-payloads#repository_ruleset
func (s *Server) queueRulesetEvent(owner string, rm *repoMeta, rs *ruleset, action, sender string) {
	snapshot := *rs
	s.queueEvent("repository_ruleset", func() map[string]any {
		source := owner
		if rm != nil {
			source = rm.Owner + "/" + rm.Name
		}
		out := map[string]any{"action": action, "repository_ruleset": s.rulesetJSON(&snapshot, source, rm == nil, false)}
		if rm != nil {
			return s.hookEnvelope(out, rm, sender, false)
		}
		out["sender"] = s.hookUser(sender)
		if in := s.installationForLocked(owner); in != nil {
			out["installation"] = map[string]any{"id": in.GetID(), "node_id": in.GetNodeID()}
		}
		if org := s.hookOrg(owner); org != nil {
			out["organization"] = org
		}
		return out
	})
}
