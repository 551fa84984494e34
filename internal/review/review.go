// Package review judges a proposed change of the control repo before it
// merges: whether the new state is valid, what it would change in which
// target repos (and so which personas it affects), and whether the author's
// teams may make it. It is what `fleetbot check control` runs on a
// control-repo pull request; it is pure (two fs.FS trees in, a Report out)
// and needs no code host.
//
// The rule (DESIGN §1, "nobody but platform admins may change what fleetbot
// manages") is: platform admins may change anything; the admins of a
// workspace may change the spec.apps list of their own workspace file (which
// catalog apps their namespace runs, with which values) and nothing else;
// every other path, including a cluster's own definition, needs a platform
// admin. Who the admins are is read from the base, so a change cannot grant
// its author the rights it needs.
package review

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// Verdicts of a Report.
const (
	// Allowed: the author's teams may make every change of the PR.
	Allowed = "allowed"
	// NeedsPlatformAdmin: at least one change needs a platform admin's
	// approval (CODEOWNERS of the control repo).
	NeedsPlatformAdmin = "needs platform admin review"
	// Invalid: the head does not validate; it must not merge.
	Invalid = "invalid"
)

// File operations.
const (
	OpAdded    = "added"
	OpChanged  = "changed"
	OpRemoved  = "removed"
	OpModified = "modified"
)

// Input is one proposed change of the control repo.
type Input struct {
	// Base and Head are the control repo trees before and after the change.
	Base, Head fs.FS
	// BaseRev and HeadRev name them in the report (commit SHAs or refs).
	BaseRev, HeadRev string
	// Author is the login of the PR's author.
	Author string
	// Member reports whether the author is a member of a team slug. Nil
	// means membership is unknown: nothing the author does is then allowed
	// on the strength of their teams.
	Member func(slug string) (bool, error)
	// BaseLoaded and HeadLoaded are Base and Head already loaded (valid) and rendered, when
	// the caller has them (serve keeps the commits it rendered); nil: Review loads and renders
	// that side itself.
	BaseLoaded, HeadLoaded *Loaded
}

// Loaded is a control repo tree loaded and rendered: what Review would make of it.
type Loaded struct {
	Repo    *control.Repo
	Targets []*fanout.Target
}

// load returns l's repo and targets, or loads and renders tree when l is nil.
func load(l *Loaded, tree fs.FS, r Renderer) (*control.Repo, []*fanout.Target, error) {
	if l != nil {
		return l.Repo, l.Targets, nil
	}
	repo, err := control.Load(tree)
	if err != nil {
		return repo, nil, err
	}
	targets, err := r.Render(repo)
	return repo, targets, err
}

// Renderer renders a loaded control repo to its target repos
// (fanout.Renderer).
type Renderer interface {
	Render(repo *control.Repo) ([]*fanout.Target, error)
}

// FileChange is one changed path of the control repo and who may change it.
type FileChange struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	// Owner is the persona whose approval the change needs.
	Owner string `json:"owner"`
	// Allowed is true when the author may make this change.
	Allowed bool `json:"allowed"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// TargetChange is how one target repo's desired state changes.
type TargetChange struct {
	Repo string      `json:"repo"`
	Kind fanout.Kind `json:"kind"`
	Name string      `json:"name"`
	Op   string      `json:"op"`
	// Files are the managed files added, changed or removed.
	Files []string `json:"files,omitempty"`
	// Access lists the team role changes on the repo.
	Access []string `json:"access,omitempty"`
	// Personas are the people the change reaches: the repo's cluster or
	// workspace admins, with their teams.
	Personas []string `json:"personas,omitempty"`
}

// Report is the review of one change.
type Report struct {
	Base   string `json:"base,omitempty"`
	Head   string `json:"head,omitempty"`
	Author string `json:"author,omitempty"`
	// AuthorTeams are the teams the author was found in, among those the
	// rules consult.
	AuthorTeams []string `json:"authorTeams,omitempty"`
	// MembershipUnknown is true when the author's teams could not be known.
	MembershipUnknown bool `json:"membershipUnknown,omitempty"`
	// Issues are the head's validation and render errors.
	Issues control.Issues `json:"issues,omitempty"`
	// BaseProblem says why the base could not be loaded or rendered, if so.
	BaseProblem string         `json:"baseProblem,omitempty"`
	Files       []FileChange   `json:"files"`
	Targets     []TargetChange `json:"targets"`
	// Personas are every persona the change reaches, deduplicated.
	Personas []string `json:"personas"`
	Verdict  string   `json:"verdict"`
	// Reasons explain the verdict.
	Reasons []string `json:"reasons,omitempty"`
}

// Valid reports whether the head validates.
func (r *Report) Valid() bool { return len(r.Issues) == 0 }

// Review checks a change: the head must load, validate and render; the
// base is rendered too, and the two desired states are compared repo by
// repo. Every changed path is matched against the persona rules with the
// base's admins. An error is returned only when a tree cannot be read at
// all (control.ErrUnreadable); an invalid head is a Report with Issues.
func Review(in Input, r Renderer) (*Report, error) {
	rep := &Report{Base: in.BaseRev, Head: in.HeadRev, Author: in.Author, Files: []FileChange{}, Targets: []TargetChange{}, Personas: []string{}}
	head, headTargets, err := load(in.HeadLoaded, in.Head, r)
	if err != nil {
		var is control.Issues
		if !errors.As(err, &is) {
			return nil, fmt.Errorf("loading the head %s: %w", in.HeadRev, err)
		}
		rep.Issues = is
	}
	base, baseTargets, err := load(in.BaseLoaded, in.Base, r)
	if err != nil {
		var is control.Issues
		if !errors.As(err, &is) {
			return nil, fmt.Errorf("loading the base %s: %w", in.BaseRev, err)
		}
		rep.BaseProblem = fmt.Sprintf("the base does not validate (%d problem(s)); its admins are unknown", len(is))
		base = nil
	}

	rep.Issues = append(rep.Issues, retirementIssues(base, head)...)
	changed, err := diffTrees(in.Base, in.Head)
	if err != nil {
		return nil, err
	}
	m := &membership{member: in.Member, found: map[string]bool{}}
	for _, c := range changed {
		rep.Files = append(rep.Files, approval(delegated(judge(c, base, head, m), c, base, head, m), c, base, in.Author, m))
	}
	rep.AuthorTeams = m.teams()
	rep.MembershipUnknown = in.Member == nil || m.err != nil
	if m.err != nil {
		rep.Reasons = append(rep.Reasons, "team membership could not be read: "+m.err.Error())
	}
	if rep.Valid() && base != nil {
		rep.Targets = diffTargets(baseTargets, headTargets, head)
	}
	seen := map[string]bool{}
	for _, t := range rep.Targets {
		for _, p := range t.Personas {
			if !seen[p] {
				seen[p] = true
				rep.Personas = append(rep.Personas, p)
			}
		}
	}
	sort.Strings(rep.Personas)
	rep.verdict()
	return rep, nil
}

func (r *Report) verdict() {
	switch {
	case !r.Valid():
		r.Verdict = Invalid
		r.Reasons = append(r.Reasons, fmt.Sprintf("the head does not validate: %d problem(s)", len(r.Issues)))
		return
	case r.BaseProblem != "":
		r.Reasons = append(r.Reasons, r.BaseProblem)
	}
	r.Verdict = Allowed
	for _, f := range r.Files {
		if !f.Allowed {
			r.Verdict = NeedsPlatformAdmin
			r.Reasons = append(r.Reasons, f.Path+": "+f.Reason)
		}
	}
	if r.Verdict == Allowed && len(r.Files) > 0 {
		r.Reasons = append(r.Reasons, "every change is within the author's rights")
	}
}

// membership asks about each team once and remembers the answers.
type membership struct {
	member func(string) (bool, error)
	found  map[string]bool
	err    error
}

func (m *membership) in(slugs []string) (string, bool) {
	if m.member == nil || m.err != nil {
		return "", false
	}
	for _, s := range slugs {
		ok, known := m.found[s]
		if !known {
			var err error
			ok, err = m.member(s)
			if err != nil {
				m.err = fmt.Errorf("team %s: %w", s, err)
				return "", false
			}
			m.found[s] = ok
		}
		if ok {
			return s, true
		}
	}
	return "", false
}

func (m *membership) teams() []string {
	var out []string
	for s, ok := range m.found {
		if ok {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// judge applies the persona rules to one changed path.
func judge(c fileDiff, base, head *control.Repo, m *membership) FileChange {
	fc := FileChange{Path: c.path, Op: c.op, Owner: control.PersonaPlatformAdmin}
	if base == nil {
		fc.Reason = "only platform admins may change the control repo, and the base's platform admins are unknown"
		return fc
	}
	if team, ok := m.in(base.Platform.Spec.Admins); ok {
		fc.Allowed, fc.Reason = true, "the author is a platform admin (team "+team+")"
		return fc
	}
	fc.Reason = platformOnly(c.path)
	if c.op != OpChanged || !strings.HasPrefix(c.path, "workspaces/") || head == nil {
		return fc
	}
	bw, hw := workspaceIn(base, c.path), workspaceIn(head, c.path)
	if bw == nil || hw == nil || bw.Metadata.Name != hw.Metadata.Name {
		return fc
	}
	fc.Owner = control.PersonaWorkspaceAdmin + "s of " + bw.Metadata.Name
	b, h := *bw, *hw
	b.Spec.Apps, h.Spec.Apps, b.Source, h.Source = nil, nil, control.Source{}, control.Source{}
	if !reflect.DeepEqual(b, h) {
		fc.Owner = control.PersonaPlatformAdmin
		fc.Reason = "workspace admins may change only spec.apps of their workspace; this change touches " + workspaceFields(bw, hw)
		return fc
	}
	if team, ok := m.in(bw.Spec.Admins); ok {
		fc.Allowed, fc.Reason = true, "workspace admins of "+bw.Metadata.Name+" (team "+team+") may change its spec.apps"
		return fc
	}
	fc.Reason = "only platform admins or the workspace admins of " + bw.Metadata.Name + " (" + strings.Join(bw.Spec.Admins, ", ") + ") may change its spec.apps"
	return fc
}

// platformOnly says why a path needs a platform admin.
func platformOnly(p string) string {
	switch {
	case p == "platform.yaml":
		return "only platform admins may change the platform (owner, admins, components, access rules, management clusters, provision profiles)"
	case strings.HasPrefix(p, "catalog/"):
		return "only platform admins may change the app catalog: every cluster and workspace using the app gets the change"
	case strings.HasPrefix(p, "clusters/"):
		return "only platform admins may change a cluster definition: its labels select platform components, its values configure them and it names the cluster's admins; cluster admins own apps/ in their cluster repo"
	case strings.HasPrefix(p, "workspaces/"):
		return "only platform admins may add, remove or rename a workspace, or change its admins, namespace or Pod Security level"
	}
	return "only platform admins may change the control repo"
}

func workspaceIn(r *control.Repo, file string) *control.Workspace {
	for _, w := range r.Workspaces {
		if w.Source.File == file {
			return w
		}
	}
	return nil
}

// workspaceFields names the fields besides spec.apps that differ.
func workspaceFields(b, h *control.Workspace) string {
	var out []string
	if b.Metadata.Name != h.Metadata.Name {
		out = append(out, "metadata.name")
	}
	if !reflect.DeepEqual(b.Metadata.Labels, h.Metadata.Labels) {
		out = append(out, "metadata.labels")
	}
	if b.Spec.Namespace != h.Spec.Namespace {
		out = append(out, "spec.namespace")
	}
	if b.Spec.PodSecurity != h.Spec.PodSecurity {
		out = append(out, "spec.podSecurity (the Pod Security level of its namespace)")
	}
	if !reflect.DeepEqual(b.Spec.Admins, h.Spec.Admins) {
		out = append(out, "spec.admins")
	}
	if len(out) == 0 {
		out = append(out, "fields other than spec.apps")
	}
	return strings.Join(out, ", ")
}

// fileDiff is one path that differs between two trees.
type fileDiff struct{ path, op string }

// diffTrees lists the regular files that differ between base and head.
func diffTrees(base, head fs.FS) ([]fileDiff, error) {
	b, err := readTree(base)
	if err != nil {
		return nil, fmt.Errorf("reading the base: %w", err)
	}
	h, err := readTree(head)
	if err != nil {
		return nil, fmt.Errorf("reading the head: %w", err)
	}
	var out []fileDiff
	for p, hd := range h {
		bd, ok := b[p]
		switch {
		case !ok:
			out = append(out, fileDiff{p, OpAdded})
		case !bytes.Equal(bd, hd):
			out = append(out, fileDiff{p, OpChanged})
		}
	}
	for p := range b {
		if _, ok := h[p]; !ok {
			out = append(out, fileDiff{p, OpRemoved})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

func readTree(fsys fs.FS) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link is its target: control.Load follows links inside the repo, so
			// retargeting one is a change of the file at the link's path.
			target, err := fs.ReadLink(fsys, p)
			if err != nil {
				return fmt.Errorf("reading symlink %s: %w", p, err)
			}
			out[p] = []byte("symlink -> " + target)
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		out[p] = b
		return nil
	})
	return out, err
}

// diffTargets compares the desired state of every target repo.
func diffTargets(base, head []*fanout.Target, repo *control.Repo) []TargetChange {
	bt := map[string]*fanout.Target{}
	for _, t := range base {
		bt[t.Repo] = t
	}
	ht := map[string]*fanout.Target{}
	for _, t := range head {
		ht[t.Repo] = t
	}
	var out []TargetChange
	for _, t := range head {
		b := bt[t.Repo]
		tc := TargetChange{Repo: t.FullName(), Kind: t.Kind, Name: t.Name, Op: OpModified}
		if b == nil {
			tc.Op, tc.Files = OpAdded, slices.Sorted(maps.Keys(t.Files))
			tc.Access = accessDiff(policy.Access{}, t.Access)
		} else {
			tc.Files = fileDiffs(b.Files, t.Files)
			tc.Access = accessDiff(b.Access, t.Access)
			if len(tc.Files) == 0 && len(tc.Access) == 0 {
				continue
			}
		}
		tc.Personas = personas(t, repo)
		out = append(out, tc)
	}
	for _, b := range base {
		if ht[b.Repo] == nil {
			out = append(out, TargetChange{Repo: b.FullName(), Kind: b.Kind, Name: b.Name, Op: OpRemoved,
				Personas: []string{fmt.Sprintf("%ss of %s (its repo keeps their files; fleetbot removes what it managed)", personaOf(b.Kind), b.Name)}})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	return out
}

func personaOf(k fanout.Kind) string {
	if k == fanout.KindWorkspace {
		return control.PersonaWorkspaceAdmin
	}
	return control.PersonaClusterAdmin
}

// personas names who a target repo's change reaches.
func personas(t *fanout.Target, repo *control.Repo) []string {
	var out []string
	switch t.Kind {
	case fanout.KindCluster:
		if c := repo.Cluster(t.Name); c != nil {
			out = append(out, fmt.Sprintf("cluster admins of %s (%s)", t.Name, teamList(c.Spec.Admins)))
			if w := repo.Workspace(c.Spec.Workspace); w != nil {
				out = append(out, fmt.Sprintf("workspace admins of %s (%s)", w.Metadata.Name, teamList(w.Spec.Admins)))
			}
		}
	case fanout.KindWorkspace:
		if w := repo.Workspace(t.Name); w != nil {
			out = append(out, fmt.Sprintf("workspace admins of %s (%s)", t.Name, teamList(w.Spec.Admins)))
		}
	}
	return out
}

func teamList(ts []string) string {
	if len(ts) == 0 {
		return "no team"
	}
	return strings.Join(ts, ", ")
}

func fileDiffs(b, h map[string][]byte) []string {
	var out []string
	for p, hd := range h {
		if bd, ok := b[p]; !ok {
			out = append(out, "+"+p)
		} else if !bytes.Equal(bd, hd) {
			out = append(out, "~"+p)
		}
	}
	for p := range b {
		if _, ok := h[p]; !ok {
			out = append(out, "-"+p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1:] < out[j][1:] })
	return out
}

func accessDiff(b, h policy.Access) []string {
	var out []string
	for _, team := range slices.Sorted(maps.Keys(h.Teams)) {
		if r, ok := b.Teams[team]; !ok {
			out = append(out, fmt.Sprintf("grant team %s %s", team, h.Teams[team]))
		} else if r != h.Teams[team] {
			out = append(out, fmt.Sprintf("team %s: %s -> %s", team, r, h.Teams[team]))
		}
	}
	for _, team := range slices.Sorted(maps.Keys(b.Teams)) {
		if _, ok := h.Teams[team]; !ok {
			out = append(out, fmt.Sprintf("revoke team %s (%s)", team, b.Teams[team]))
		}
	}
	return out
}
