package githubtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// state is everything the fake knows besides git objects. It is guarded by Server.mu and
// persisted as JSON when the server runs with a state directory.
type state struct {
	NextID        int64                   `json:"next_id"`
	Accounts      map[string]*account     `json:"accounts"` // lower(login) -> account
	Repos         map[string]*repoMeta    `json:"repos"`    // lower(owner/name) -> repo
	Teams         map[string]*team        `json:"teams"`    // lower(org/slug) -> team
	Installations map[int64]*installation `json:"installations"`
	Tokens        map[string]*accessToken `json:"tokens"`
	CheckRuns     map[int64]*checkRun     `json:"check_runs"`
}

type account struct {
	ID    int64  `json:"id"`
	Login string `json:"login"`
	Type  string `json:"type"` // User, Organization, Bot
	// Members is the org membership (lower(login) -> role "member"|"admin").
	Members map[string]string `json:"members,omitempty"`
	// Enterprise is true for an organization owned by an enterprise account (internal repos).
	Enterprise bool `json:"enterprise,omitempty"`
	// Plan is an organization's GitHub plan: "free" lacks branch protection on private
	// repositories; "" is a paid plan.
	Plan string `json:"plan,omitempty"`
	// BasePermission is an organization's base permission (default_repository_permission:
	// read, write, admin; "" or none: no access beyond what is granted), held by every member
	// on every repository of it, outside collaborators excepted.
	BasePermission string `json:"basePermission,omitempty"`
	// Rulesets are an organization's rulesets; PropertySchema its custom property definitions.
	Rulesets       []*ruleset    `json:"rulesets,omitempty"`
	PropertySchema []propertyDef `json:"propertySchema,omitempty"`
}

type team struct {
	ID          int64             `json:"id"`
	Org         string            `json:"org"`
	Slug        string            `json:"slug"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Privacy     string            `json:"privacy"`
	Members     map[string]string `json:"members"` // lower(login) -> role member|maintainer
	Repos       map[string]string `json:"repos"`   // lower(owner/name) -> permission
}

type installation struct {
	ID      int64     `json:"id"`
	Account string    `json:"account"`
	Created time.Time `json:"created"`
}

type accessToken struct {
	Token          string    `json:"token"`
	Login          string    `json:"login"`
	InstallationID int64     `json:"installation_id,omitempty"`
	ExpiresAt      time.Time `json:"expires_at,omitempty"`
	// Repos narrows an installation token to these repositories (keys; nil: all of the
	// installation's), Permissions to these permissions (nil: all of the App's).
	Repos       []string          `json:"repos,omitempty"`
	Permissions map[string]string `json:"permissions,omitempty"`
}

type repoMeta struct {
	// Rulesets are the repository's own rulesets; Properties its custom property values.
	Rulesets   []*ruleset        `json:"rulesets,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`

	ID            int64                  `json:"id"`
	Owner         string                 `json:"owner"`
	Name          string                 `json:"name"`
	Description   string                 `json:"description"`
	Visibility    string                 `json:"visibility"`
	DefaultBranch string                 `json:"default_branch"`
	Archived      bool                   `json:"archived"`
	Topics        []string               `json:"topics"`
	CreatedAt     time.Time              `json:"created_at"`
	UpdatedAt     time.Time              `json:"updated_at"`
	PushedAt      time.Time              `json:"pushed_at"`
	NextNumber    int                    `json:"next_number"`
	Issues        map[int]*issue         `json:"issues"`
	Comments      []*comment             `json:"comments"`
	Statuses      []*commitStatus        `json:"statuses"`
	Protection    map[string]*protection `json:"protection"`
	Collaborators map[string]string      `json:"collaborators"` // lower(login) -> permission
	// AllowAutoMerge is the repository setting "Allow auto-merge" (GitHub's default: off).
	AllowAutoMerge bool `json:"allow_auto_merge,omitempty"`
	// NoMergeCommit, NoSquashMerge and NoRebaseMerge turn off a merge method (the settings
	// allow_merge_commit, allow_squash_merge and allow_rebase_merge, on by default).
	NoMergeCommit bool `json:"no_merge_commit,omitempty"`
	NoSquashMerge bool `json:"no_squash_merge,omitempty"`
	NoRebaseMerge bool `json:"no_rebase_merge,omitempty"`
	// Verified holds the commits GitHub signed (created through the API without an author).
	Verified map[string]bool `json:"verified"`
}

func (r *repoMeta) fullName() string { return r.Owner + "/" + r.Name }

// issue is an issue or a pull request; they share numbers as on GitHub.
type issue struct {
	Number    int       `json:"number"`
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	User      string    `json:"user"`
	State     string    `json:"state"` // open, closed
	Labels    []string  `json:"labels"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	ClosedAt  time.Time `json:"closed_at"`
	Pull      *pull     `json:"pull,omitempty"`
}

type pull struct {
	Head           string    `json:"head"` // branch name in the same repo
	Base           string    `json:"base"`
	HeadSHA        string    `json:"head_sha"` // frozen when closed
	BaseSHA        string    `json:"base_sha"`
	Draft          bool      `json:"draft"`
	Merged         bool      `json:"merged"`
	MergedAt       time.Time `json:"merged_at"`
	MergedBy       string    `json:"merged_by"`
	MergeCommitSHA string    `json:"merge_commit_sha"`
	AutoMerge      bool      `json:"auto_merge"`
	// AutoMergeMethod is the merge method auto-merge was enabled with (merge, squash, rebase).
	AutoMergeMethod string `json:"auto_merge_method,omitempty"`
	// AutoMergeAt and AutoMergeBy are when and by whom auto-merge was enabled.
	AutoMergeAt time.Time `json:"auto_merge_at,omitempty"`
	AutoMergeBy string    `json:"auto_merge_by,omitempty"`
	// Reviews are the submitted reviews, oldest first.
	Reviews []*review `json:"reviews,omitempty"`
}

// review is a submitted pull request review.
type review struct {
	ID          int64     `json:"id"`
	User        string    `json:"user"`
	State       string    `json:"state"` // APPROVED, CHANGES_REQUESTED, COMMENTED
	Body        string    `json:"body"`
	CommitID    string    `json:"commit_id"`
	SubmittedAt time.Time `json:"submitted_at"`
}

type comment struct {
	ID        int64     `json:"id"`
	Number    int       `json:"number"`
	Body      string    `json:"body"`
	User      string    `json:"user"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

type commitStatus struct {
	ID          int64     `json:"id"`
	SHA         string    `json:"sha"`
	State       string    `json:"state"`
	Context     string    `json:"context"`
	Description string    `json:"description"`
	TargetURL   string    `json:"target_url"`
	Creator     string    `json:"creator"`
	CreatedAt   time.Time `json:"created_at"`
	// AppID is the GitHub App whose installation token created the status (0: a user).
	AppID int64 `json:"app_id,omitempty"`
}

type checkRun struct {
	ID          int64           `json:"id"`
	Repo        string          `json:"repo"` // lower(owner/name)
	Name        string          `json:"name"`
	HeadSHA     string          `json:"head_sha"`
	Status      string          `json:"status"`
	Conclusion  string          `json:"conclusion"`
	DetailsURL  string          `json:"details_url"`
	ExternalID  string          `json:"external_id"`
	StartedAt   time.Time       `json:"started_at"`
	CompletedAt time.Time       `json:"completed_at"`
	Output      json.RawMessage `json:"output,omitempty"`
	AppID       int64           `json:"app_id"`

	// Annotations are every annotation the check run's requests carried, in order (GitHub
	// appends each request's); Output holds none.
	Annotations []json.RawMessage `json:"annotations,omitempty"`
}

type protection struct {
	RequirePRReviews        bool     `json:"require_pr_reviews"`
	RequireCodeOwnerReviews bool     `json:"require_code_owner_reviews"`
	DismissStaleReviews     bool     `json:"dismiss_stale_reviews"`
	RequiredApprovals       int      `json:"required_approvals"`
	RequiredStatusChecks    []string `json:"required_status_checks"`
	// RequiredCheckApps binds a required status check to the GitHub App that must provide it
	// (context -> app_id, from checks: [{context, app_id}]); a context absent here may be
	// provided by anyone.
	RequiredCheckApps    map[string]int64 `json:"required_check_apps,omitempty"`
	StrictStatusChecks   bool             `json:"strict_status_checks"`
	HasStatusChecks      bool             `json:"has_status_checks"`
	EnforceAdmins        bool             `json:"enforce_admins"`
	AllowForcePushes     bool             `json:"allow_force_pushes"`
	AllowDeletions       bool             `json:"allow_deletions"`
	RequireLinearHistory bool             `json:"require_linear_history"`
}

func newState() *state {
	return &state{
		NextID:        1000,
		Accounts:      map[string]*account{},
		Repos:         map[string]*repoMeta{},
		Teams:         map[string]*team{},
		Installations: map[int64]*installation{},
		Tokens:        map[string]*accessToken{},
		CheckRuns:     map[int64]*checkRun{},
	}
}

func (st *state) nextID() int64 {
	st.NextID++
	return st.NextID
}

func repoKey(owner, name string) string { return strings.ToLower(owner + "/" + name) }

func teamKey(org, slug string) string { return strings.ToLower(org + "/" + slug) }

const stateFile = "state.json"

// loadState reads dir/state.json; a missing file is a fresh state.
func loadState(dir string) (*state, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading fake github state: %w", err)
	}
	st := newState()
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("decoding fake github state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return st, nil
}

// save writes the state atomically (write to a temp file, rename).
func (st *state) save(dir string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding fake github state: %w", err)
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing fake github state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("writing fake github state: %w", err)
	}
	return nil
}
