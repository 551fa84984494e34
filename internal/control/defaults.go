package control

import "k8s.io/apimachinery/pkg/util/intstr"

// Fleet is the platform's settings with every default resolved: what fanout, reconcile and
// the front ends read, so that no package downstream of the control repo derives a default
// again (and none can derive a different one). Repo.Fleet returns it.
type Fleet struct {
	// Owner is the GitHub org (or user) owning every target repo; Admins the platform admin
	// teams.
	Owner  string
	Admins []string
	// DefaultBranch and Visibility of every target repo.
	DefaultBranch, Visibility string
	// ClusterRepo and WorkspaceRepo are the repo name patterns ({name}: the object's name);
	// ControlRepo names the control repo when fleetbot guards it ("" otherwise).
	ClusterRepo, WorkspaceRepo, ControlRepo string
	// PRBranch is the bot branch of every target repo; Labels go on its pull requests;
	// AutoMerge is pullRequests.merge: auto.
	PRBranch  string
	Labels    []string
	AutoMerge bool
	// FluxInterval is the interval of the Flux objects (a Flux duration, validated by Load);
	// FluxSecretRef the Secret a workspace GitRepository reads with ("": none).
	FluxInterval, FluxSecretRef string
	// AccessMode is AccessEnforce or AccessAdditive.
	AccessMode string
	// MaxRemovals caps the targets one plan may remove; MaxAccessRemovals the grants one run
	// may take from a repo.
	MaxRemovals, MaxAccessRemovals intstr.IntOrString
	// BranchRules are the declared rules of every target repo's default branch (nil: the
	// default protection, as classic branch protection).
	BranchRules *BranchRules
}

// Fleet returns the platform's settings with every default resolved, the same for a repo
// Load returned (whose spec already carries them) and one built by hand.
func (r *Repo) Fleet() Fleet {
	var s PlatformSpec
	if r != nil && r.Platform != nil {
		s = r.Platform.Spec
	}
	defaultPlatform(&s)
	return Fleet{
		Owner: s.Owner, Admins: s.Admins,
		DefaultBranch: s.DefaultBranch, Visibility: s.Repos.Visibility,
		ClusterRepo: s.Repos.Cluster, WorkspaceRepo: s.Repos.Workspace, ControlRepo: s.Repos.Control,
		PRBranch: s.PullRequests.Branch, Labels: s.PullRequests.Labels, AutoMerge: s.PullRequests.Merge == MergeAuto,
		FluxInterval: s.Flux.Interval, FluxSecretRef: *s.Flux.SecretRef,
		AccessMode:  s.Access.Mode,
		MaxRemovals: *s.MaxRemovals, MaxAccessRemovals: *s.Access.MaxAccessRemovals,
		BranchRules: s.Access.BranchRules,
	}
}

// applyDefaults fills every absent field that has a documented default. It and Repo.Fleet
// share defaultPlatform: the one place a platform default is derived.
func applyDefaults(r *Repo) {
	if p := r.Platform; p != nil {
		defaultPlatform(&p.Spec)
	}
	for _, w := range r.Workspaces {
		setDefault(&w.Spec.Namespace, w.Metadata.Name)
	}
}

// defaultPlatform fills the absent fields of s with their defaults. Pointer fields get new
// values, so a copy of a spec can be defaulted without touching the original.
func defaultPlatform(s *PlatformSpec) {
	setDefault(&s.DefaultBranch, DefaultBranch)
	setDefault(&s.Repos.Cluster, DefaultClusterRepo)
	setDefault(&s.Repos.Workspace, DefaultWorkspaceRepo)
	setDefault(&s.Repos.Visibility, DefaultVisibility)
	setDefault(&s.PullRequests.Branch, DefaultPRBranch)
	setDefault(&s.PullRequests.Merge, MergeManual)
	setDefault(&s.Flux.Interval, DefaultFluxInterval)
	if s.Flux.SecretRef == nil {
		v := DefaultFluxSecretRef
		s.Flux.SecretRef = &v
	}
	setDefault(&s.Access.Mode, AccessEnforce)
	if s.MaxRemovals == nil {
		v := intstr.FromString(DefaultMaxRemovals)
		s.MaxRemovals = &v
	}
	if s.Access.MaxAccessRemovals == nil {
		v := intstr.FromString(DefaultMaxAccessRemovals)
		s.Access.MaxAccessRemovals = &v
	}
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}
