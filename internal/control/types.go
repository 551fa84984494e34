// Package control models the fleetbot control repo: the Platform, Cluster,
// Workspace and App objects of apiVersion fleetbot.io/v1alpha1, how they are
// loaded from a directory or any fs.FS, and how they are validated.
//
// Loading keeps "could not read" apart from "is invalid": a missing or
// unreadable repo is an error of its own, while every validation problem is
// collected as an Issue with file:line and a hint, so a user sees all of them
// at once.
package control

import (
	"k8s.io/apimachinery/pkg/util/intstr"
)

// APIVersion is the only apiVersion fleetbot accepts in a control repo.
const APIVersion = "fleetbot.io/v1alpha1"

// Object kinds of a control repo.
const (
	KindPlatform  = "Platform"
	KindCluster   = "Cluster"
	KindWorkspace = "Workspace"
	KindApp       = "App"
)

// App scopes: a cluster-scoped app may only be a platform component; a
// namespaced app may also be deployed by workspaces.
const (
	ScopeCluster    = "cluster"
	ScopeNamespaced = "namespaced"
)

// Access modes for repo permissions.
const (
	// AccessEnforce converges grants to the persona matrix, removing extras.
	AccessEnforce = "enforce"
	// AccessAdditive only adds missing grants and never removes any.
	AccessAdditive = "additive"
)

// Merge modes for fleetbot's pull requests.
const (
	MergeManual = "manual"
	MergeAuto   = "auto"
)

// Defaults applied by Load when a field is absent.
const (
	DefaultBranch            = "main"
	DefaultClusterRepo       = "cluster-{name}"
	DefaultWorkspaceRepo     = "workspace-{name}"
	DefaultVisibility        = "private"
	DefaultPRBranch          = "fleetbot/sync"
	DefaultFluxInterval      = "10m"
	DefaultFluxSecretRef     = "flux-system"
	DefaultMaxRemovals       = "10%"
	DefaultMaxAccessRemovals = "25%"
)

// Meta is the metadata of every control object.
type Meta struct {
	Name   string            `yaml:"name" json:"name"`
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// TypeMeta identifies the schema of a control object.
type TypeMeta struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
}

// Source says where an object was read from, so every error can point at the
// file and line that caused it.
type Source struct {
	// File is the slash-separated path relative to the control repo root.
	File string `json:"file"`
	// Line is the 1-based line of the object's first line in File.
	Line int `json:"line"`
	// lines maps a dotted field path ("spec.components.1.app") to its line.
	lines map[string]int
}

// LineOf returns the line of the field at the dotted path (for example
// "spec.values.metallb_range"), falling back to the closest parent that is
// known, and finally to the object's first line.
func (s Source) LineOf(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := s.lines[p]; ok {
			return l
		}
	}
	if s.Line == 0 {
		return 1
	}
	return s.Line
}

// At renders "file:line" for the field at the dotted path.
func (s Source) At(path string) Position {
	return Position{File: s.File, Line: s.LineOf(path)}
}

func parentPath(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '.' {
			return p[:i]
		}
	}
	return ""
}

// Platform is the one object in platform.yaml: who owns the target repos and
// how fleetbot writes to them.
type Platform struct {
	TypeMeta `yaml:",inline" json:",inline"`
	Metadata Meta         `yaml:"metadata" json:"metadata"`
	Spec     PlatformSpec `yaml:"spec" json:"spec"`
	Source   Source       `yaml:"-" json:"-"`
}

// PlatformSpec is the desired state of the whole fleet.
type PlatformSpec struct {
	// Owner is the GitHub org (or user) owning every target repo.
	Owner string `yaml:"owner" json:"owner"`
	// Admins are the team slugs of the platform admins.
	Admins []string `yaml:"admins" json:"admins"`
	// DefaultBranch of every target repo (default main).
	DefaultBranch string          `yaml:"defaultBranch,omitempty" json:"defaultBranch,omitempty"`
	Repos         RepoSpec        `yaml:"repos,omitempty" json:"repos,omitempty"`
	PullRequests  PullRequestSpec `yaml:"pullRequests,omitempty" json:"pullRequests,omitempty"`
	Flux          FluxSpec        `yaml:"flux,omitempty" json:"flux,omitempty"`
	Access        AccessSpec      `yaml:"access,omitempty" json:"access,omitempty"`
	// MaxRemovals caps how many targets one plan may remove, as a count or
	// a percentage of all targets (default 10%, at least 1).
	MaxRemovals *intstr.IntOrString `yaml:"maxRemovals,omitempty" json:"maxRemovals,omitempty"`
	// Components are the platform components rendered into cluster repos.
	Components []Component `yaml:"components,omitempty" json:"components,omitempty"`
	// ManagementClusters are the clusters running Cluster API on which
	// fleetbot provisions clusters (see Cluster spec.provision).
	ManagementClusters []ManagementCluster `yaml:"managementClusters,omitempty" json:"managementClusters,omitempty"`
	// ProvisionProfiles are the pinned Cluster API charts clusters are
	// provisioned with.
	ProvisionProfiles []ProvisionProfile `yaml:"provisionProfiles,omitempty" json:"provisionProfiles,omitempty"`
	// Rollout says in which waves a change reaches the clusters (default: one wave, every
	// cluster at once).
	Rollout RolloutSpec `yaml:"rollout,omitempty" json:"rollout,omitempty"`
	// Tenants extends what a workspace repo may hold beyond fleetbot's default allowlist
	// (see DefaultTenantKinds).
	Tenants TenantSpec `yaml:"tenants,omitempty" json:"tenants,omitempty"`
	// RetiredClusters are the names of clusters removed from the control repo whose objects
	// are retained (spec.provision.deletionPolicy: Retain keeps the HelmRelease and the
	// kubeconfig Secret on the management cluster). A cluster file taking one of these names
	// again needs platform-admin review (check control).
	RetiredClusters []string `yaml:"retiredClusters,omitempty" json:"retiredClusters,omitempty"`
}

// TenantSpec is the platform's extension of the tenant allowlist.
type TenantSpec struct {
	// Allow lists further namespaced kinds a workspace repo may hold, on top of
	// DefaultTenantKinds (for example a ServiceMonitor of the platform's monitoring).
	Allow []TenantKind `yaml:"allow,omitempty" json:"allow,omitempty"`
}

// TenantKind is one namespaced kind a workspace repo may hold.
type TenantKind struct {
	// APIGroup is the kind's API group ("" for the core group, e.g. apps,
	// monitoring.coreos.com).
	APIGroup string `yaml:"apiGroup" json:"apiGroup"`
	// Kind is the object kind, e.g. ServiceMonitor.
	Kind string `yaml:"kind" json:"kind"`
	// Fields are the spec fields a tenant object of a Flux kind may set (required for a kind of
	// a *.toolkit.fluxcd.io group, which runs with a controller's rights; ignored otherwise).
	Fields []string `yaml:"fields,omitempty" json:"fields,omitempty"`
}

// Pod Security Admission levels (https://kubernetes.io/docs/concepts/security/pod-security-standards/).
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// DefaultComponentPodSecurity is the Pod Security level of a platform component's namespaces
// when neither platform.yaml nor the app's Namespace says otherwise.
const DefaultComponentPodSecurity = PodSecurityBaseline

// RolloutSpec declares the ordered waves a change takes through the fleet.
type RolloutSpec struct {
	// Waves are taken in order. A cluster belongs to the first wave whose clusterSelector
	// matches it; clusters no wave matches form a last, implicit wave.
	Waves []Wave `yaml:"waves,omitempty" json:"waves,omitempty"`
	// HealthTimeout is how long, after a merge, Flux has to report the merge commit healthy
	// before the cluster counts as not reported (against its wave's maxUnavailable), as a Go
	// duration such as 30m or 1h (default 30m).
	HealthTimeout string `yaml:"healthTimeout,omitempty" json:"healthTimeout,omitempty"`
	// OnFailure is what a rollout does when a wave goes over its failure budget: halt (the
	// default: nothing new starts) or rollback (also restore, on every repo the revision
	// reached, the last revision that was healthy there). A wave may set its own.
	OnFailure string `yaml:"onFailure,omitempty" json:"onFailure,omitempty"`
	// Windows are the change windows: no new pull request opens and nothing merges outside
	// an allow window or inside a deny window (deny wins); open pull requests are still
	// updated. None: any time.
	Windows []ChangeWindow `yaml:"windows,omitempty" json:"windows,omitempty"`
	// Health says how Flux on each cluster reports health to fleetbot (default: commit
	// statuses through a github Provider).
	Health HealthSpec `yaml:"health,omitempty" json:"health,omitempty"`
}

// Rollout failure actions (spec.rollout.onFailure, a wave's onFailure).
const (
	// OnFailureHalt stops the rollout: no new pull request opens, what merged stays.
	OnFailureHalt = "halt"
	// OnFailureRollback stops it and restores the last healthy revision where it reached.
	OnFailureRollback = "rollback"
)

// ApprovalRequired is a wave's approval setting that makes it wait for an approval.
const ApprovalRequired = "required"

// Change window kinds.
const (
	WindowAllow = "allow"
	WindowDeny  = "deny"
)

// ChangeWindow is one weekly window of spec.rollout.windows.
type ChangeWindow struct {
	// Kind is allow (rollouts may proceed inside it) or deny (a freeze: they may not).
	Kind string `yaml:"kind" json:"kind"`
	// Days are the weekdays the window opens on (Mon, Tue, Wed, Thu, Fri, Sat, Sun), in its
	// time zone; none: every day.
	Days []string `yaml:"days,omitempty" json:"days,omitempty"`
	// Start is the time of day it opens, HH:MM on a 24-hour clock in its time zone.
	Start string `yaml:"start" json:"start"`
	// Duration is how long it stays open, as a Go duration such as 8h or 30m (at most 168h);
	// it is elapsed time, so a window across a daylight-saving change keeps its length.
	Duration string `yaml:"duration" json:"duration"`
	// TimeZone is an IANA time zone such as Europe/Berlin (default UTC).
	TimeZone string `yaml:"timeZone,omitempty" json:"timeZone,omitempty"`
}

// Health providers: how Flux reports a cluster's health (spec.rollout.health.provider).
const (
	// HealthGitHub: notification-controller posts commit statuses on the cluster repo with a
	// GitHub credential each cluster holds (the Kustomizations of flux-system).
	HealthGitHub = "github"
	// HealthGenericHMAC: notification-controller posts every event of the cluster's
	// Kustomizations and HelmReleases, in flux-system and in each workspace namespace, to
	// fleetbot serve, signed with a key per cluster; no cluster holds a GitHub credential.
	HealthGenericHMAC = "generic-hmac"
)

// HealthSpec says how Flux reports health to fleetbot.
type HealthSpec struct {
	// Provider is github (commit statuses, the default) or generic-hmac (events to fleetbot
	// serve's health endpoint, signed per cluster).
	Provider string `yaml:"provider,omitempty" json:"provider,omitempty"`
	// URL is fleetbot serve's health endpoint as the clusters reach it, e.g.
	// https://fleetbot.example.com/health (required with generic-hmac). Each cluster posts
	// to URL/<cluster>, each workspace namespace to URL/<cluster>/<namespace>.
	URL string `yaml:"url,omitempty" json:"url,omitempty"`
}

// ComponentRollout overrides spec.rollout.waves for the changes to one platform component.
type ComponentRollout struct {
	// Waves are the component's own waves, taken as spec.rollout.waves are. None ({} or
	// waves: []): a change to the component reaches every cluster at once.
	Waves []Wave `yaml:"waves,omitempty" json:"waves,omitempty"`
}

// Wave is one step of a rollout.
type Wave struct {
	// Name identifies the wave in plans, check runs and `fleetbot rollout status`.
	Name string `yaml:"name" json:"name"`
	// ClusterSelector picks the wave's clusters by label; {} matches every cluster.
	ClusterSelector *Selector `yaml:"clusterSelector" json:"clusterSelector"`
	// MaxParallel caps how many of the wave's pull requests are open at once (0: no cap).
	MaxParallel int `yaml:"maxParallel,omitempty" json:"maxParallel,omitempty"`
	// Soak is how long the wave must stay healthy before the next wave starts, as a Go
	// duration such as 30m or 2h (default 0).
	Soak string `yaml:"soak,omitempty" json:"soak,omitempty"`
	// Merge is manual or auto for this wave's pull requests (default: spec.pullRequests.merge).
	Merge string `yaml:"merge,omitempty" json:"merge,omitempty"`
	// MaxFailures is how many of the wave's clusters taking part in a revision may fail
	// (Flux reported a failure for the merge) while the rollout goes on, as a count or a
	// percentage of those clusters, rounded down (default: maxUnavailable).
	MaxFailures *CountOrPercent `yaml:"maxFailures,omitempty" json:"maxFailures,omitempty"`
	// MaxUnavailable is how many of them may be unavailable, failed or not reported healthy
	// within healthTimeout of their merge, while the rollout goes on, as a count or a
	// percentage rounded down (default 0: the first failure or silent cluster stops it).
	MaxUnavailable *CountOrPercent `yaml:"maxUnavailable,omitempty" json:"maxUnavailable,omitempty"`
	// OnFailure overrides spec.rollout.onFailure for this wave: halt or rollback.
	OnFailure string `yaml:"onFailure,omitempty" json:"onFailure,omitempty"`
	// Approval: required makes the wave wait, once the waves before it are done, until it is
	// approved (fleetbot rollout approve WAVE: the file rollout/approvals/WAVE.yaml, committed
	// to the control repo and reviewed as its CODEOWNERS say).
	Approval string `yaml:"approval,omitempty" json:"approval,omitempty"`
}

// RepoSpec names and shapes the target repos.
type RepoSpec struct {
	// Cluster is the cluster repo name pattern; {name} is the cluster name.
	Cluster string `yaml:"cluster,omitempty" json:"cluster,omitempty"`
	// Workspace is the workspace repo name pattern; {name} is the workspace name.
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
	// Visibility of created repos: private, internal or public.
	Visibility string `yaml:"visibility,omitempty" json:"visibility,omitempty"`
	// Control optionally names the control repo itself (a repo of
	// spec.owner, e.g. fleet-control). When set, fleetbot guards it like a
	// target repo: platform admins are its only team (admin) and its default
	// branch is protected. fleetbot never writes its content.
	Control string `yaml:"control,omitempty" json:"control,omitempty"`
}

// PullRequestSpec says how fleetbot proposes changes.
type PullRequestSpec struct {
	// Branch is the one long-lived bot branch per target repo.
	Branch string   `yaml:"branch,omitempty" json:"branch,omitempty"`
	Labels []string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Merge is manual or auto (GitHub auto-merge).
	Merge string `yaml:"merge,omitempty" json:"merge,omitempty"`
}

// FluxSpec parameterises the Flux objects fleetbot writes.
type FluxSpec struct {
	Interval string `yaml:"interval,omitempty" json:"interval,omitempty"`
	// SecretRef is the Secret, in the workspace namespace, that a workspace
	// GitRepository reads its repo with. Absent: DefaultFluxSecretRef; ""
	// (secretRef: "") for none, when the repos are readable without
	// credentials (public repos, a git server on the cluster's network).
	SecretRef *string `yaml:"secretRef,omitempty" json:"secretRef,omitempty"`
}

// AccessSpec tunes how repo permissions converge.
type AccessSpec struct {
	// Mode is enforce (default) or additive.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// MaxAccessRemovals caps the share of a repo's grants one run may remove
	// (default 25%).
	MaxAccessRemovals *intstr.IntOrString `yaml:"maxAccessRemovals,omitempty" json:"maxAccessRemovals,omitempty"`
	// BranchRules, when set, declares once the rules of every target repo's default branch,
	// which fleetbot enforces as a ruleset (on each repo, or one for the org) instead of a
	// classic branch protection. Absent: the default protection, as classic branch protection.
	BranchRules *BranchRules `yaml:"branchRules,omitempty" json:"branchRules,omitempty"`
}

// BranchRules are the rules of every target repo's default branch. Pull requests are always
// required, stale approvals dismissed, force pushes and deletion blocked.
type BranchRules struct {
	// RequiredApprovals is how many approving reviews a pull request needs (0 to 10; default 1).
	RequiredApprovals *int `yaml:"requiredApprovals,omitempty" json:"requiredApprovals,omitempty"`
	// CodeOwnerReview requires an approval of a code owner of each changed file (default true).
	CodeOwnerReview *bool `yaml:"codeOwnerReview,omitempty" json:"codeOwnerReview,omitempty"`
	// RequiredChecks are the status checks a pull request's head must pass.
	RequiredChecks []RequiredCheckSpec `yaml:"requiredChecks,omitempty" json:"requiredChecks,omitempty"`
	// Bypass are the actors that may bypass the rules (none by default).
	Bypass []BypassSpec `yaml:"bypass,omitempty" json:"bypass,omitempty"`
	// Organization enforces the rules as one organization ruleset that targets the repos by
	// their custom properties (fleetbot-kind, fleetbot-cluster, fleetbot-workspace), set when
	// fleetbot creates a repo; it needs the GitHub App's organization permissions
	// "Administration" (write) and "Custom properties" (admin). Default false: one ruleset per
	// repo, which needs nothing beyond the repository permission "Administration".
	Organization bool `yaml:"organization,omitempty" json:"organization,omitempty"`
}

// RequiredCheckSpec is one required status check: its name (a check run's or a commit
// status's context) and, optionally, the GitHub App that must provide it.
type RequiredCheckSpec struct {
	Context string `yaml:"context" json:"context"`
	AppID   int64  `yaml:"appId,omitempty" json:"appId,omitempty"`
}

// BypassSpec is one actor that may bypass the branch rules: exactly one of a team (slug), a
// GitHub App (id), a repository role (admin, maintain or write) or the organization's admins.
type BypassSpec struct {
	Team              string `yaml:"team,omitempty" json:"team,omitempty"`
	App               int64  `yaml:"app,omitempty" json:"app,omitempty"`
	Role              string `yaml:"role,omitempty" json:"role,omitempty"`
	OrganizationAdmin bool   `yaml:"organizationAdmin,omitempty" json:"organizationAdmin,omitempty"`
}

// Component deploys a catalog app to the clusters its selector matches.
type Component struct {
	App string `yaml:"app" json:"app"`
	// ClusterSelector selects clusters by label; nil selects none, an empty
	// selector selects every cluster.
	ClusterSelector *Selector `yaml:"clusterSelector,omitempty" json:"clusterSelector,omitempty"`
	Values          Values    `yaml:"values,omitempty" json:"values,omitempty"`
	// Rollout, when set, gives a change to this component its own waves instead of
	// spec.rollout.waves (a change touching several lists of waves takes them combined).
	Rollout *ComponentRollout `yaml:"rollout,omitempty" json:"rollout,omitempty"`
	// PodSecurity is the Pod Security Admission level (privileged, baseline or restricted)
	// enforced on the namespaces the component's app renders (its Namespace objects). Absent:
	// the level the app's Namespace sets in pod-security.kubernetes.io/enforce, else baseline.
	PodSecurity string `yaml:"podSecurity,omitempty" json:"podSecurity,omitempty"`
}

// Selector is a Kubernetes label selector.
type Selector struct {
	MatchLabels      map[string]string `yaml:"matchLabels,omitempty" json:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `yaml:"matchExpressions,omitempty" json:"matchExpressions,omitempty"`
}

// Requirement is one matchExpressions entry of a label selector.
type Requirement struct {
	Key      string   `yaml:"key" json:"key"`
	Operator string   `yaml:"operator" json:"operator"`
	Values   []string `yaml:"values,omitempty" json:"values,omitempty"`
}

// Values are substitution values by name; YAML scalars of any type are kept
// as their literal text.
type Values map[string]string

// Cluster is one Kubernetes cluster and its repo.
type Cluster struct {
	TypeMeta `yaml:",inline" json:",inline"`
	Metadata Meta        `yaml:"metadata" json:"metadata"`
	Spec     ClusterSpec `yaml:"spec" json:"spec"`
	Source   Source      `yaml:"-" json:"-"`
}

// ClusterSpec is the desired state of one cluster.
type ClusterSpec struct {
	// Workspace is the optional workspace the cluster was adopted into.
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
	// Admins are the cluster admin team slugs.
	Admins []string `yaml:"admins,omitempty" json:"admins,omitempty"`
	// Values override app and component values for this cluster.
	Values Values `yaml:"values,omitempty" json:"values,omitempty"`
	// Provision, when set, has fleetbot create the cluster through Cluster
	// API on a management cluster (see Provision).
	Provision *Provision `yaml:"provision,omitempty" json:"provision,omitempty"`
}

// Workspace is a group of clusters confined to one namespace.
type Workspace struct {
	TypeMeta `yaml:",inline" json:",inline"`
	Metadata Meta          `yaml:"metadata" json:"metadata"`
	Spec     WorkspaceSpec `yaml:"spec" json:"spec"`
	Source   Source        `yaml:"-" json:"-"`
}

// WorkspaceSpec is the desired state of one workspace.
type WorkspaceSpec struct {
	// Namespace confines the workspace on every cluster (default metadata.name).
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// Admins are the workspace admin team slugs.
	Admins []string `yaml:"admins,omitempty" json:"admins,omitempty"`
	// Apps are namespaced catalog apps for every cluster of the workspace.
	Apps []AppRef `yaml:"apps,omitempty" json:"apps,omitempty"`
	// PodSecurity is the Pod Security Admission level enforced on the workspace namespace:
	// restricted (default) or baseline, a platform decision (check control asks a platform
	// admin). privileged is never allowed for a workspace.
	PodSecurity string `yaml:"podSecurity,omitempty" json:"podSecurity,omitempty"`
}

// AppRef deploys a catalog app with values.
type AppRef struct {
	App    string `yaml:"app" json:"app"`
	Values Values `yaml:"values,omitempty" json:"values,omitempty"`
}

// App is a catalog entry: app.yaml plus a kustomize directory beside it.
type App struct {
	TypeMeta `yaml:",inline" json:",inline"`
	Metadata Meta    `yaml:"metadata" json:"metadata"`
	Spec     AppSpec `yaml:"spec" json:"spec"`
	Source   Source  `yaml:"-" json:"-"`
	// Dir is the slash-separated directory of the app in the control repo
	// ("catalog/<name>").
	Dir string `yaml:"-" json:"-"`
	// Files holds every regular file of the app directory, keyed by path
	// relative to Dir, so rendering never touches the disk again.
	Files map[string][]byte `yaml:"-" json:"-"`
}

// AppSpec declares an app's scope and parameters.
type AppSpec struct {
	// Scope is cluster or namespaced.
	Scope string `yaml:"scope" json:"scope"`
	// Values declares the parameters referenced in manifests as ${name}.
	Values map[string]ValueSpec `yaml:"values,omitempty" json:"values,omitempty"`
	// DependsOn names the catalog apps this app needs applied first where it
	// is a platform component: its Flux Kustomization platform-<app> waits
	// until theirs are Ready (e.g. a component's configuration after the
	// component installing its CRDs). Every dependency must be a component
	// of each cluster the app is a component of. Ignored in workspaces, whose
	// apps are applied together.
	DependsOn []string `yaml:"dependsOn,omitempty" json:"dependsOn,omitempty"`
}

// ValueSpec declares one app parameter.
type ValueSpec struct {
	Required    bool    `yaml:"required,omitempty" json:"required,omitempty"`
	Default     *string `yaml:"default,omitempty" json:"default,omitempty"`
	Description string  `yaml:"description,omitempty" json:"description,omitempty"`
}

// Repo is a loaded control repo: every object, defaults applied.
type Repo struct {
	Platform   *Platform
	Clusters   []*Cluster   // sorted by name
	Workspaces []*Workspace // sorted by name
	Apps       []*App       // sorted by name
	// Revision is the control repo commit the objects were read at, when known.
	Revision string
	// Paused is set when the control repo holds rollout/paused: no rollout wave starts and
	// fleetbot merges nothing (see PausedFile).
	Paused *Pause
	// Digest identifies the content of the control repo: every input of the render
	// (platform.yaml, clusters/, workspaces/, catalog/) by name and content, as
	// "sha256:<hex>". The rollout records (rollout/) and everything else are not inputs, so a
	// commit that only pauses, approves or skips keeps the digest; records are bound to it.
	Digest string
	// Approvals are the rollout/approvals/<wave>.yaml records, Skips the
	// rollout/skips/<cluster>.yaml ones, whatever content they are about (see
	// ApprovedWaves, SkippedClusters).
	Approvals, Skips []RolloutRecord
	// Rollback is the rollout/rollback.yaml record, nil without one (see RolledBack).
	Rollback *RolloutRecord
	// Codeowners is the control repo's CODEOWNERS, nil when it has none.
	Codeowners *Codeowners
	// Warnings are findings that are legal but almost always a mistake (a component whose
	// clusterSelector matches no cluster: a typo removes it from every cluster). validate and
	// plan print them; with --strict they are errors.
	Warnings Issues
}

// Cluster returns the cluster of that name, or nil.
func (r *Repo) Cluster(name string) *Cluster {
	for _, c := range r.Clusters {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// Workspace returns the workspace of that name, or nil.
func (r *Repo) Workspace(name string) *Workspace {
	for _, w := range r.Workspaces {
		if w.Metadata.Name == name {
			return w
		}
	}
	return nil
}

// App returns the app of that name, or nil.
func (r *Repo) App(name string) *App {
	for _, a := range r.Apps {
		if a.Metadata.Name == name {
			return a
		}
	}
	return nil
}

// PodSecurityLevel returns the workspace's Pod Security level, defaulting to restricted.
func (w *Workspace) PodSecurityLevel() string {
	if w.Spec.PodSecurity != "" {
		return w.Spec.PodSecurity
	}
	return PodSecurityRestricted
}

// Namespace returns the workspace's namespace, defaulting to its name.
func (w *Workspace) Namespace() string {
	if w.Spec.Namespace != "" {
		return w.Spec.Namespace
	}
	return w.Metadata.Name
}
