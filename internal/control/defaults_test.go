package control

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// TestFleetResolvesEveryDefault: a platform.yaml that sets only what it must loads into a
// Fleet carrying every documented default, and a repo built by hand (no Load) resolves to the
// same Fleet, so nothing downstream derives a default of its own.
func TestFleetResolvesEveryDefault(t *testing.T) {
	want := Fleet{
		Owner: "acme", Admins: []string{"platform"},
		DefaultBranch: "main", Visibility: "private",
		ClusterRepo: "cluster-{name}", WorkspaceRepo: "workspace-{name}",
		PRBranch: "fleetbot/sync", FluxInterval: "10m", FluxSecretRef: "flux-system",
		AccessMode:  AccessEnforce,
		MaxRemovals: intstr.FromString("10%"), MaxAccessRemovals: intstr.FromString("25%"),
	}
	repo, err := Load(fstest.MapFS{"platform.yaml": {Data: []byte(
		"apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n")}})
	require.NoError(t, err)
	assert.Equal(t, want, repo.Fleet(), "loaded")

	byHand := &Repo{Platform: &Platform{Spec: PlatformSpec{Owner: "acme", Admins: []string{"platform"}}}}
	assert.Equal(t, want, byHand.Fleet(), "built by hand")
	assert.Nil(t, byHand.Platform.Spec.Flux.SecretRef, "Fleet does not write into the repo")
	assert.Equal(t, "cluster-a", byHand.ClusterRepo("a"))
	assert.Equal(t, "workspace-b", byHand.WorkspaceRepo("b"))
}

// TestFleetKeepsWhatIsSet: set values win over defaults, including an explicitly empty
// flux secretRef (repos readable without credentials).
func TestFleetKeepsWhatIsSet(t *testing.T) {
	none := ""
	max := intstr.FromInt32(3)
	r := &Repo{Platform: &Platform{Spec: PlatformSpec{
		Owner: "acme", DefaultBranch: "trunk",
		Repos:        RepoSpec{Cluster: "k-{name}", Workspace: "w-{name}", Visibility: "internal", Control: "fleet"},
		PullRequests: PullRequestSpec{Branch: "bot", Labels: []string{"x"}, Merge: MergeAuto},
		Flux:         FluxSpec{Interval: "1h", SecretRef: &none},
		Access:       AccessSpec{Mode: AccessAdditive, MaxAccessRemovals: &max},
		MaxRemovals:  &max,
	}}}
	fl := r.Fleet()
	assert.Equal(t, Fleet{
		Owner: "acme", DefaultBranch: "trunk", Visibility: "internal",
		ClusterRepo: "k-{name}", WorkspaceRepo: "w-{name}", ControlRepo: "fleet",
		PRBranch: "bot", Labels: []string{"x"}, AutoMerge: true,
		FluxInterval: "1h", FluxSecretRef: "", AccessMode: AccessAdditive,
		MaxRemovals: max, MaxAccessRemovals: max,
	}, fl)
}

// TestAccessRemovalDefaultAgrees: policy.Diff's own default (a nil cap) and the Fleet's are
// the same, so a caller of policy.Diff without a Fleet gets the documented 25% too.
func TestAccessRemovalDefaultAgrees(t *testing.T) {
	assert.Equal(t, policy.DefaultMaxAccessRemovals, DefaultMaxAccessRemovals)
}
