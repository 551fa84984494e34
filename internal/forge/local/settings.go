package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// settings is PATH/owner/repo.settings.json: who manages the repo, for
// which cluster or workspace, and its access (team roles, protection).
type settings struct {
	ManagedBy     string                 `json:"managedBy,omitempty"`
	Kind          fanout.Kind            `json:"kind,omitempty"`
	Name          string                 `json:"name,omitempty"`
	Visibility    string                 `json:"visibility,omitempty"`
	DefaultBranch string                 `json:"defaultBranch,omitempty"`
	Teams         map[string]policy.Role `json:"teams"`
	Protection    *policy.Protection     `json:"protection,omitempty"`
	Collaborators map[string]policy.Role `json:"collaborators"`
	// AllowAutoMerge is the "Allow auto-merge" setting (pullRequests.merge: auto).
	AllowAutoMerge bool `json:"allowAutoMerge,omitempty"`
	// Ruleset is the repo's own ruleset enforcing its declared branch rules (the org ruleset
	// is OrgRulesetFile's).
	Ruleset *policy.Ruleset `json:"ruleset,omitempty"`
	// Properties are the repo's custom property values.
	Properties map[string]string `json:"properties,omitempty"`
	// Archived marks a read-only repo, as on GitHub: reconcile skips it and
	// reports it.
	Archived bool `json:"archived,omitempty"`
}

// localUnit is how the local forge observes and stores one access unit (policy.Unit) in a
// repo's settings file: observe copies the unit's fields into the access, store the access's
// into the file. ApplyAccess stores what policy.Converge says the plan leaves, unit by unit.
type localUnit struct {
	unit    policy.UnitName
	observe func(s *settings, a *policy.Access)
	store   func(s *settings, a policy.Access)
}

// localUnits has one entry per policy.Unit (TestLocalUnitsCoverPolicy).
var localUnits = []localUnit{
	{unit: policy.UnitTeams,
		observe: func(s *settings, a *policy.Access) { a.Teams = s.Teams },
		store: func(s *settings, a policy.Access) {
			s.Teams = a.Teams
			if s.Teams == nil {
				s.Teams = map[string]policy.Role{}
			}
		}},
	{unit: policy.UnitCollaborators,
		observe: func(s *settings, a *policy.Access) { a.Collaborators = s.Collaborators },
		store: func(s *settings, a policy.Access) {
			s.Collaborators = a.Collaborators
			if s.Collaborators == nil {
				s.Collaborators = map[string]policy.Role{}
			}
		}},
	{unit: policy.UnitProtection,
		observe: func(s *settings, a *policy.Access) { a.Protection = s.Protection },
		store:   func(s *settings, a policy.Access) { s.Protection = a.Protection }},
	{unit: policy.UnitRepoSettings,
		observe: func(s *settings, a *policy.Access) { a.AllowAutoMerge = s.AllowAutoMerge },
		store:   func(s *settings, a policy.Access) { s.AllowAutoMerge = a.AllowAutoMerge }},
	// The org ruleset is not the repo's: Access and ApplyAccess read and write it in
	// OrgRulesetFile (orgRuleset), and a repo's settings keep only its own.
	{unit: policy.UnitRuleset,
		observe: func(s *settings, a *policy.Access) { a.Ruleset = s.Ruleset.Clone() },
		store: func(s *settings, a policy.Access) {
			if a.Ruleset == nil || !a.Ruleset.Organization {
				s.Ruleset = a.Ruleset.Clone()
			}
		}},
	{unit: policy.UnitProperties,
		observe: func(s *settings, a *policy.Access) { a.Properties = maps.Clone(s.Properties) },
		store:   func(s *settings, a policy.Access) { s.Properties = maps.Clone(a.Properties) }},
}

// setAccess stores every unit of a in the settings.
func (s *settings) setAccess(a policy.Access) {
	for _, u := range localUnits {
		u.store(s, a)
	}
}

// access observes every unit of the settings.
func (s *settings) access() policy.Access {
	var a policy.Access
	for _, u := range localUnits {
		u.observe(s, &a)
	}
	return a
}

// ErrCorruptSettings is returned when a settings.json file cannot be
// decoded. The file is left exactly as it is.
var ErrCorruptSettings = errors.New("corrupt settings file")

func readSettings(name string) (*settings, error) {
	var s settings
	found, err := decodeJSONFile(name, &s, false, ErrCorruptSettings, "fleetbot left it untouched: fix the JSON or move the file away")
	if !found || err != nil {
		return nil, err
	}
	return &s, nil
}

// decodeJSONFile reads the JSON file name into v, rejecting unknown fields
// so that a rewrite can never silently drop data. found is false for a
// missing file (and, with emptyIsMissing, an empty one). A file that does
// not decode is an error wrapping corrupt, naming the file, ending in hint.
func decodeJSONFile(name string, v any, emptyIsMissing bool, corrupt error, hint string) (found bool, err error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", name, err)
	}
	if emptyIsMissing && len(bytes.TrimSpace(b)) == 0 {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return true, fmt.Errorf("%w %s: %v; %s", corrupt, name, err, hint)
	}
	return true, nil
}

func writeSettings(name string, s settings) error {
	b, err := encodeJSON(s)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	if err := writeAtomic(name, b); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// Access returns the access settings of a repo (empty when it has none); with declared branch
// rules enforced by the org (desired.Rules.Organization), its ruleset is the org's.
func (f *Forge) Access(ctx context.Context, owner, repo string, desired policy.Access) (policy.Access, error) {
	p, err := f.paths(owner, repo)
	if err != nil {
		return policy.Access{}, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := readSettings(p.settings)
	if err != nil || s == nil {
		return policy.Access{}, err
	}
	a := s.access()
	if desired.Rules != nil && desired.Rules.Organization {
		if a.Ruleset, err = f.orgRuleset(owner); err != nil {
			return policy.Access{}, err
		}
	}
	return a, nil
}

// ListManaged returns the repos of owner whose settings say fleetbot
// manages them, sorted by repo name.
func (f *Forge) ListManaged(ctx context.Context, owner string) ([]pr.ManagedRepo, error) {
	if err := validName("owner", owner); err != nil {
		return nil, err
	}
	dir := filepath.Join(f.root, owner)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []pr.ManagedRepo
	for _, e := range entries {
		repo, ok := strings.CutSuffix(e.Name(), ".settings.json")
		if !ok || e.IsDir() {
			continue
		}
		s, err := readSettings(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if s == nil || s.ManagedBy != ManagedBy {
			continue
		}
		out = append(out, pr.ManagedRepo{Kind: s.Kind, Name: s.Name, Repo: repo})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Repo < out[b].Repo })
	return out, nil
}
