package control

import "k8s.io/apimachinery/pkg/util/intstr"

// applyDefaults fills every absent field that has a documented default.
func applyDefaults(r *Repo) {
	if p := r.Platform; p != nil {
		s := &p.Spec
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
	for _, w := range r.Workspaces {
		setDefault(&w.Spec.Namespace, w.Metadata.Name)
	}
}

func setDefault(field *string, value string) {
	if *field == "" {
		*field = value
	}
}
