package githubtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/go-github/v62/github"
)

func (s *Server) checkRunJSON(rm *repoMeta, cr *checkRun) *github.CheckRun {
	out := &github.CheckRun{
		ID: github.Int64(cr.ID), NodeID: github.String(nodeID("CheckRun", cr.ID)),
		Name: github.String(cr.Name), HeadSHA: github.String(cr.HeadSHA), Status: github.String(cr.Status),
		ExternalID: github.String(cr.ExternalID), DetailsURL: github.String(cr.DetailsURL),
		URL:     github.String(fmt.Sprintf("%s/check-runs/%d", s.repoAPI(rm), cr.ID)),
		HTMLURL: github.String(fmt.Sprintf("%s/%s/runs/%d", s.URL, rm.fullName(), cr.ID)),
		App:     &github.App{ID: github.Int64(s.cfg.appID), Slug: github.String(s.cfg.appSlug)},
	}
	if cr.AppID != 0 && cr.AppID != s.cfg.appID {
		out.App = &github.App{ID: github.Int64(cr.AppID), Slug: github.String(fmt.Sprintf("app-%d", cr.AppID))} // AddCheckRun's
	}
	if cr.Conclusion != "" {
		out.Conclusion = github.String(cr.Conclusion)
	}
	if !cr.StartedAt.IsZero() {
		out.StartedAt = &github.Timestamp{Time: cr.StartedAt}
	}
	if !cr.CompletedAt.IsZero() {
		out.CompletedAt = &github.Timestamp{Time: cr.CompletedAt}
	}
	if len(cr.Output) > 0 {
		var o github.CheckRunOutput
		if json.Unmarshal(cr.Output, &o) == nil {
			out.Output = &o
		}
	}
	return out
}

type checkRunRequest struct {
	Name        *string          `json:"name"`
	HeadSHA     *string          `json:"head_sha"`
	Status      *string          `json:"status"`
	Conclusion  *string          `json:"conclusion"`
	DetailsURL  *string          `json:"details_url"`
	ExternalID  *string          `json:"external_id"`
	StartedAt   *time.Time       `json:"started_at"`
	CompletedAt *time.Time       `json:"completed_at"`
	Output      *json.RawMessage `json:"output"`
}

// apply copies the set fields of a request onto a check run.
func (req checkRunRequest) apply(cr *checkRun, now time.Time) {
	if req.Name != nil {
		cr.Name = *req.Name
	}
	if req.Status != nil {
		cr.Status = *req.Status
	}
	if req.Conclusion != nil {
		cr.Conclusion, cr.Status = *req.Conclusion, "completed"
	}
	if req.DetailsURL != nil {
		cr.DetailsURL = *req.DetailsURL
	}
	if req.ExternalID != nil {
		cr.ExternalID = *req.ExternalID
	}
	if req.StartedAt != nil {
		cr.StartedAt = *req.StartedAt
	}
	if req.CompletedAt != nil {
		cr.CompletedAt = *req.CompletedAt
	}
	if req.Output != nil {
		cr.Output = cr.appendAnnotations(*req.Output)
	}
	if cr.Status == "completed" && cr.CompletedAt.IsZero() {
		cr.CompletedAt = now
	}
}

// checkRunsDocURL is the documentation_url of GitHub's answers on check runs.
const checkRunsDocURL = "https://docs.github.com/rest/checks/runs#create-a-check-run"

// onlyApps refuses a check run request not made by a GitHub App: "To create a check run, you
// must use a GitHub App. OAuth apps and authenticated users are not able to create a check
// suite." A personal access token gets 403 "You must authenticate via a GitHub App."
// https://docs.github.com/rest/checks/runs#create-a-check-run
func onlyApps(w http.ResponseWriter, r *http.Request) bool {
	if principalOf(r).kind == "installation" {
		return true
	}
	writeJSON(w, http.StatusForbidden, apiError{Message: "You must authenticate via a GitHub App.", DocumentationURL: checkRunsDocURL})
	return false
}

// validate refuses what GitHub refuses in a check run request: a conclusion missing while
// status is completed or completed_at is given ("Required if you provide completed_at or a
// status of completed"), the conclusion stale ("only GitHub can set this"), and an output
// over GitHub's limits (checkRunOutputError).
// https://docs.github.com/rest/checks/runs#update-a-check-run
func (req checkRunRequest) validate() *httpError {
	completed := (req.Status != nil && *req.Status == "completed") || req.CompletedAt != nil
	switch {
	case completed && req.Conclusion == nil:
		return validationError("CheckRun", "conclusion", "missing_field",
			"conclusion is required when status is completed or completed_at is given")
	case req.Conclusion != nil && *req.Conclusion == "stale":
		return validationError("CheckRun", "conclusion", "invalid", "stale can only be set by GitHub")
	}
	if req.Output != nil {
		return checkRunOutputError(*req.Output)
	}
	return nil
}

func (s *Server) handleCreateCheckRun(w http.ResponseWriter, r *http.Request) {
	if !onlyApps(w, r) {
		return
	}
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req checkRunRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if req.Name == nil || req.HeadSHA == nil {
		writeErr(w, validationFailed("CheckRun", "name", "missing_field"))
		return
	}
	if herr := req.validate(); herr != nil {
		writeErr(w, herr)
		return
	}
	head, err := g.resolveCommit(*req.HeadSHA)
	if err != nil {
		writeErr(w, validationFailed("CheckRun", "head_sha", "invalid"))
		return
	}
	now := s.clock.Now()
	cr := &checkRun{ID: s.st.nextID(), Repo: repoKey(rm.Owner, rm.Name), HeadSHA: head.Hash.String(), Status: "queued", StartedAt: now, AppID: s.cfg.appID}
	req.apply(cr, now)
	s.st.CheckRuns[cr.ID] = cr
	s.queueCheckRunEvents(rm, cr, "created", false, principalOf(r).login)
	writeJSON(w, http.StatusCreated, s.fullCheckRunJSON(rm, cr))
}

func (s *Server) handleUpdateCheckRun(w http.ResponseWriter, r *http.Request) {
	if !onlyApps(w, r) {
		return
	}
	rm, err := s.writableRepo(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	cr := s.st.CheckRuns[id]
	if cr == nil || cr.Repo != repoKey(rm.Owner, rm.Name) {
		writeErr(w, errNotFound)
		return
	}
	var req checkRunRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	req.HeadSHA = nil
	if herr := req.validate(); herr != nil {
		writeErr(w, herr)
		return
	}
	wasCompleted := cr.Status == "completed"
	req.apply(cr, s.clock.Now())
	s.queueCheckRunEvents(rm, cr, "", wasCompleted, principalOf(r).login)
	writeJSON(w, http.StatusOK, s.fullCheckRunJSON(rm, cr))
}

func (s *Server) handleListCheckRuns(w http.ResponseWriter, r *http.Request) {
	rm, c, err := s.refCommit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	// check_name and app_id filter the runs (the App that made them).
	// https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
	q := r.URL.Query()
	name := q.Get("check_name")
	appID, _ := strconv.ParseInt(q.Get("app_id"), 10, 64)
	var matched []*checkRun
	for _, id := range slices.Sorted(maps.Keys(s.st.CheckRuns)) {
		cr := s.st.CheckRuns[id]
		if cr.Repo == repoKey(rm.Owner, rm.Name) && cr.HeadSHA == c.Hash.String() && (name == "" || cr.Name == name) &&
			(appID == 0 || s.checkRunApp(cr) == appID) {
			matched = append(matched, cr)
		}
	}
	slices.Reverse(matched) // newest first
	runs := []map[string]any{}
	for _, cr := range matched {
		runs = append(runs, s.fullCheckRunJSON(rm, cr))
	}
	page, link := paginate(r, runs)
	if link != "" {
		w.Header().Set("Link", link)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": page})
}

func (s *Server) statusJSON(rm *repoMeta, st *commitStatus) *github.RepoStatus {
	return &github.RepoStatus{
		ID: github.Int64(st.ID), NodeID: github.String(nodeID("StatusContext", st.ID)),
		State: github.String(st.State), Context: github.String(st.Context),
		Description: github.String(st.Description), TargetURL: github.String(st.TargetURL),
		Creator: s.userJSON(st.Creator), AvatarURL: s.userJSON(st.Creator).AvatarURL,
		CreatedAt: &github.Timestamp{Time: st.CreatedAt}, UpdatedAt: &github.Timestamp{Time: st.CreatedAt},
		URL: github.String(s.repoAPI(rm) + "/statuses/" + st.SHA),
	}
}

func (s *Server) handleCreateStatus(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.gitData(r, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	sha := r.PathValue("sha")
	if c, err := g.resolveCommit(sha); err != nil || c.Hash.String() != sha {
		writeErr(w, errorf(http.StatusUnprocessableEntity, "No commit found for SHA: %s", sha))
		return
	}
	var req struct {
		State       string `json:"state"`
		Context     string `json:"context"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	switch req.State {
	case "error", "failure", "pending", "success":
	default:
		writeErr(w, validationFailed("Status", "state", "custom"))
		return
	}
	if req.Context == "" {
		req.Context = "default"
	}
	st := &commitStatus{ID: s.st.nextID(), SHA: sha, State: req.State, Context: req.Context,
		Description: req.Description, TargetURL: req.TargetURL, Creator: principalOf(r).login, CreatedAt: s.clock.Now()}
	if principalOf(r).kind == "installation" {
		st.AppID = s.cfg.appID // the App a required check bound to an App counts it from
	}
	rm.Statuses = append(rm.Statuses, st)
	s.queueEvent("status", func() map[string]any { return s.statusPayloadLocked(rm, st) })
	writeJSON(w, http.StatusCreated, s.statusJSON(rm, st))
}

func (s *Server) handleListStatuses(w http.ResponseWriter, r *http.Request) {
	rm, c, err := s.refCommit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []*github.RepoStatus{}
	for i := len(rm.Statuses) - 1; i >= 0; i-- {
		if st := rm.Statuses[i]; st.SHA == c.Hash.String() {
			out = append(out, s.statusJSON(rm, st))
		}
	}
	writePage(w, r, out)
}

// queueCheckRunEvents queues the check_run events of a check run created (action "created",
// and "completed" too when it is created completed) or updated (action "": "completed" when
// the update completed it). GitHub sends them to the App that created the run.
// https://docs.github.com/webhooks/webhook-events-and-payloads#check_run
func (s *Server) queueCheckRunEvents(rm *repoMeta, cr *checkRun, action string, wasCompleted bool, sender string) {
	if action != "" {
		s.queueEvent("check_run", func() map[string]any { return s.checkRunPayloadLocked(rm, cr, action, sender) })
	}
	if cr.Status == "completed" && !wasCompleted {
		snapshot := *cr
		s.queueEvent("check_run", func() map[string]any { return s.checkRunPayloadLocked(rm, &snapshot, "completed", sender) })
	}
}

// checkRunApp is the id of the GitHub App that made cr (the fake's own App unless AddCheckRun
// named another).
func (s *Server) checkRunApp(cr *checkRun) int64 {
	if cr.AppID != 0 {
		return cr.AppID
	}
	return s.cfg.appID
}
