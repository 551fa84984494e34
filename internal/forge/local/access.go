package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// OrgFile is the optional PATH/<owner>/.org.json that stands for the org on
// the local forge: {"teams": ["platform", "payments-sre", ...], "baseRole": "pull"}. When it is
// absent every team is taken to exist; when present, a team the control repo
// names that is not listed is an error, as on GitHub. baseRole is the org's base permission
// (policy.Org.BaseRole; optional): a read-only team grant it covers is not stored.
const OrgFile = ".org.json"

// orgFile is the content of OrgFile.
type orgFile struct {
	Teams    []string    `json:"teams"`
	BaseRole policy.Role `json:"baseRole,omitempty"`
}

// Org implements reconcile.Forge: the teams of PATH/<owner>/.org.json (nil
// when there is no such file), the repos whose settings say archived, and
// fleetbot's own committer name, which is never removed.
func (f *Forge) Org(ctx context.Context, owner string) (policy.Org, error) {
	o, err := f.orgTeams(owner)
	if err != nil {
		return o, err
	}
	dir := filepath.Join(f.root, owner)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		repo, ok := strings.CutSuffix(e.Name(), ".settings.json")
		if !ok || e.IsDir() {
			continue
		}
		s, err := readSettings(filepath.Join(dir, e.Name()))
		if err != nil {
			return o, err
		}
		if s != nil && s.Archived {
			o.Archived = append(o.Archived, repo)
		}
	}
	sort.Strings(o.Archived)
	return o, nil
}

// ApplyAccess implements reconcile.Forge: it applies the plan's steps to
// the repo's settings.json (one write, only when something changes).
func (f *Forge) ApplyAccess(ctx context.Context, owner, repo string, p policy.Plan) error {
	pa, err := f.paths(owner, repo)
	if err != nil {
		return err
	}
	defer f.lockRepo(owner, repo)()
	if _, err := f.openStore(pa); err != nil {
		return err
	}
	s, err := readSettings(pa.settings)
	if err != nil {
		return err
	}
	if s == nil {
		s = &settings{}
	}
	if s.Archived {
		return fmt.Errorf("repo %s is archived: its settings are read-only", pa.full)
	}
	if p.Ruleset != nil && p.Ruleset.Organization {
		if err := f.writeOrgRuleset(owner, p.Ruleset); err != nil {
			return err
		}
	}
	before, _ := json.Marshal(s)
	s.setAccess(policy.Converge(s.access(), p))
	after, _ := json.Marshal(s)
	if bytes.Equal(before, after) {
		return nil
	}
	return writeSettings(pa.settings, *s)
}

// CodeownersErrors implements reconcile.CodeownersChecker offline: the
// local forge has no GitHub to ask, so it runs policy.CheckCODEOWNERS on the
// blob with the org's teams (OrgFile) and the repo's access.
func (f *Forge) CodeownersErrors(ctx context.Context, owner, repo, blob string, access policy.Access) ([]policy.CodeownersError, error) {
	data, err := f.Blob(ctx, owner, repo, blob)
	if err != nil {
		return nil, err
	}
	// Only the team list matters here; Org would also read every repo's
	// settings, which per repo made a run quadratic in the fleet size.
	org, err := f.orgTeams(owner)
	if err != nil {
		return nil, err
	}
	return policy.CheckCODEOWNERS(".github/CODEOWNERS", data, owner, org, access), nil
}

// orgTeams reads the owner's team list from OrgFile, when there is one; an
// owner without it has every team.
func (f *Forge) orgTeams(owner string) (policy.Org, error) {
	if err := validName("owner", owner); err != nil {
		return policy.Org{}, err
	}
	o := policy.Org{Name: owner, Self: []string{CommitterName}}
	name := filepath.Join(f.root, owner, OrgFile)
	var of orgFile
	found, err := decodeJSONFile(name, &of, false, ErrCorruptSettings, `want {"teams": ["slug", ...]}`)
	if !found || err != nil {
		return o, err
	}
	o.Teams = append([]string{}, of.Teams...)
	switch of.BaseRole {
	case "", policy.RolePull, policy.RolePush, policy.RoleAdmin:
		o.BaseRole = of.BaseRole
	default:
		return o, fmt.Errorf("%w %s: baseRole %q is not a base role; use pull, push or admin (GitHub's read, write, admin) or leave it out",
			ErrCorruptSettings, name, of.BaseRole)
	}
	return o, nil
}

// OrgRulesetFile is PATH/<owner>/.org-ruleset.json, the local forge's organization ruleset
// (policy.Ruleset as JSON): the one ruleset that enforces the declared branch rules of every
// repo whose custom properties it targets (platform spec.access.branchRules.organization).
const OrgRulesetFile = ".org-ruleset.json"

// orgRuleset reads the owner's OrgRulesetFile; nil when there is none.
func (f *Forge) orgRuleset(owner string) (*policy.Ruleset, error) {
	var r policy.Ruleset
	name := filepath.Join(f.root, owner, OrgRulesetFile)
	found, err := decodeJSONFile(name, &r, false, ErrCorruptSettings, "fleetbot left it untouched: fix the JSON or move the file away")
	if !found || err != nil {
		return nil, err
	}
	return &r, nil
}

// writeOrgRuleset stores the org ruleset (once per change: a repo whose plan names the ruleset
// already stored writes nothing).
func (f *Forge) writeOrgRuleset(owner string, r *policy.Ruleset) error {
	f.orgMu.Lock()
	defer f.orgMu.Unlock()
	have, err := f.orgRuleset(owner)
	if err != nil {
		return err
	}
	want := r.Clone()
	want.ID = 1
	if have != nil {
		want.ID = have.ID
	}
	a, _ := json.Marshal(have)
	b, _ := json.Marshal(want)
	if bytes.Equal(a, b) {
		return nil
	}
	data, err := encodeJSON(want)
	if err != nil {
		return err
	}
	name := filepath.Join(f.root, owner, OrgRulesetFile)
	if err := writeAtomic(name, data); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// BaseRole implements reconcile.BaseRoleReader: the baseRole of OrgFile.
func (f *Forge) BaseRole(ctx context.Context, owner string) (policy.Role, error) {
	o, err := f.orgTeams(owner)
	return o.BaseRole, err
}
