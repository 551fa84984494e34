package review

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// provisionBase is testdata/provision/control with a CODEOWNERS that gives
// the payments-sre team the cluster files named payments-*.
func provisionBase(t *testing.T, extra map[string]string) fstest.MapFS {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "provision", "control")
	m := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(dir), p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	}))
	m[".github/CODEOWNERS"] = &fstest.MapFile{Data: []byte("* @acme/platform\n/clusters/payments-*.yaml @acme/payments-sre @acme/platform # delegated\n")}
	for p, s := range extra {
		m[p] = &fstest.MapFile{Data: []byte(s)}
	}
	return m
}

func with(base fstest.MapFS, files map[string]string) fstest.MapFS {
	head := fstest.MapFS{}
	for p, f := range base {
		head[p] = f
	}
	for p, s := range files {
		if s == "" {
			delete(head, p)
			continue
		}
		head[p] = &fstest.MapFile{Data: []byte(s)}
	}
	return head
}

const paymentsCluster = `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: payments-eu-1
spec:
  admins: [payments-sre]
  provision:
    managementCluster: hub-eu
    profile: aws
    kubernetesVersion: v1.36.1
    region: eu-west-1
    nodePools:
      - {name: workers, count: 3, size: m5.large}
    values: {sshKeyName: payments}
`

func TestTeamAddsClusterUnderPathItOwns(t *testing.T) {
	base := provisionBase(t, nil)
	rep := review(t, base, with(base, map[string]string{"clusters/payments-eu-1.yaml": paymentsCluster}), "carol", memberOf("payments-sre"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	require.Len(t, rep.Files, 1)
	assert.Equal(t, "team payments-sre owns clusters/payments-eu-1.yaml by the control repo's CODEOWNERS (/clusters/payments-*.yaml); the change leaves spec.provision.deletionPolicy alone", rep.Files[0].Reason)
	var repos []string
	for _, tc := range rep.Targets {
		repos = append(repos, tc.Repo)
	}
	assert.ElementsMatch(t, []string{"acme/cluster-payments-eu-1", "acme/mgmt-hub-eu"}, repos, "the new cluster repo and its HelmRelease in the management repo")
}

func TestProvisionChangesThatStayPlatformAdmins(t *testing.T) {
	withPolicy := paymentsCluster + "    deletionPolicy: Delete\n"
	owned := provisionBase(t, map[string]string{"clusters/payments-eu-1.yaml": paymentsCluster})
	tests := []struct {
		name   string
		base   fstest.MapFS
		head   map[string]string
		reason string
	}{
		{name: "new cluster file that sets deletionPolicy", base: provisionBase(t, nil),
			head: map[string]string{"clusters/payments-eu-1.yaml": withPolicy}, reason: "only platform admins may set or change spec.provision.deletionPolicy"},
		{name: "owned cluster file whose deletionPolicy changes", base: owned,
			head: map[string]string{"clusters/payments-eu-1.yaml": withPolicy}, reason: "only platform admins may set or change spec.provision.deletionPolicy"},
		{name: "removing an owned cluster file", base: owned,
			head: map[string]string{"clusters/payments-eu-1.yaml": "", "platform.yaml": retire(t, owned, "payments-eu-1")}, reason: "only platform admins may change a cluster definition"},
		{name: "cluster file under a path the team does not own", base: provisionBase(t, nil),
			head: map[string]string{"clusters/search-eu-1.yaml": replaceName(paymentsCluster, "search-eu-1")}, reason: "only platform admins may change a cluster definition"},
		{name: "provision profile", base: provisionBase(t, nil),
			head: map[string]string{"platform.yaml": replaceIn(t, provisionBase(t, nil), "platform.yaml", "version: 1.4.2", "version: 1.5.0")}, reason: "provision profiles"},
		{name: "management cluster", base: provisionBase(t, nil),
			head: map[string]string{"platform.yaml": replaceIn(t, provisionBase(t, nil), "platform.yaml", "    - name: hub-eu\n", "    - name: hub-eu\n    - name: hub-ap\n")}, reason: "management clusters"},
		{name: "granting itself a path in CODEOWNERS", base: provisionBase(t, nil),
			head:   map[string]string{".github/CODEOWNERS": "* @acme/platform\n/clusters/ @acme/payments-sre\n", "clusters/search-eu-1.yaml": replaceName(paymentsCluster, "search-eu-1")},
			reason: "only platform admins may change"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := review(t, tc.base, with(tc.base, tc.head), "carol", memberOf("payments-sre"))
			require.Equal(t, NeedsPlatformAdmin, rep.Verdict, "%s: %v", tc.name, rep.Reasons)
			found := false
			for _, f := range rep.Files {
				if !f.Allowed && strings.Contains(f.Reason, tc.reason) {
					found = true
				}
			}
			assert.True(t, found, "%s: no file refused for %q in %v", tc.name, tc.reason, rep.Files)
		})
	}
}

func TestOwnedClusterScaledByItsTeam(t *testing.T) {
	base := provisionBase(t, map[string]string{"clusters/payments-eu-1.yaml": paymentsCluster})
	head := with(base, map[string]string{"clusters/payments-eu-1.yaml": replaceIn(t, base, "clusters/payments-eu-1.yaml", "count: 3", "count: 5")})
	rep := review(t, base, head, "carol", memberOf("payments-sre"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	require.Len(t, rep.Targets, 1)
	assert.Equal(t, "acme/mgmt-hub-eu", rep.Targets[0].Repo, "scaling is a change of the management repo only")
	assert.Equal(t, []string{"~README.md", "~provision/clusters/payments-eu-1.yaml"}, rep.Targets[0].Files, "its HelmRelease and the README's table of clusters")

	rep = review(t, base, head, "dave", memberOf("search-devs"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict)
	assert.Contains(t, rep.Files[0].Reason, "only platform admins or the owners of clusters/payments-eu-1.yaml by the control repo's CODEOWNERS (payments-sre)")
}

func TestCodeownersMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"*", "clusters/a.yaml", true},
		{"/clusters/payments-*.yaml", "clusters/payments-eu-1.yaml", true},
		{"/clusters/payments-*.yaml", "clusters/search-eu-1.yaml", false},
		{"/clusters/", "clusters/a.yaml", true},
		{"clusters/", "clusters/a.yaml", true},
		{"*.yaml", "clusters/a.yaml", true},
		{"/platform.yaml", "clusters/platform.yaml", false},
	} {
		_, ok := control.ParseCodeowners("CODEOWNERS", []byte(tc.pattern+" @acme/team\n")).Owner(tc.path)
		assert.Equal(t, tc.want, ok, "%s ~ %s", tc.pattern, tc.path)
	}
}

// retire returns the platform.yaml of m recording names in spec.retiredClusters.
func retire(t *testing.T, m fstest.MapFS, names ...string) string {
	t.Helper()
	return replaceIn(t, m, "platform.yaml", "  admins: [platform]\n", "  admins: [platform]\n  retiredClusters: ["+strings.Join(names, ", ")+"]\n")
}

// TestAttackClusterFileNamingAnotherCluster: a team delegated clusters/payments-*.yaml cannot
// be another cluster: a file naming another cluster does not validate (both locations named);
// the name of a retired cluster whose objects are retained, or of a management cluster, needs a
// platform admin even under the team's path.
func TestAttackClusterFileNamingAnotherCluster(t *testing.T) {
	base := provisionBase(t, nil)
	for _, other := range []string{"prod-eu-1", "hub-eu"} {
		rep := review(t, base, with(base, map[string]string{"clusters/payments-3.yaml": replaceName(paymentsCluster, other)}), "carol", memberOf("payments-sre"))
		require.Equal(t, Invalid, rep.Verdict, other)
		require.NotEmpty(t, rep.Issues)
		assert.Contains(t, rep.Issues[0].String(), `clusters/payments-3.yaml:4: cluster "`+other+`" is defined in clusters/payments-3.yaml`)
		assert.Contains(t, rep.Issues[0].Hint, "rename the file to clusters/"+other+".yaml, or set metadata.name: payments-3")
	}

	retired := with(base, map[string]string{"platform.yaml": retire(t, base, "payments-old")})
	rep := review(t, retired, with(retired, map[string]string{"clusters/payments-old.yaml": replaceName(paymentsCluster, "payments-old")}), "carol", memberOf("payments-sre"))
	require.Equal(t, NeedsPlatformAdmin, rep.Verdict, rep.Reasons)
	assert.Contains(t, rep.Files[0].Reason, "re-uses the name of retired cluster payments-old (spec.retiredClusters in platform.yaml)")

	mgmt := with(base, map[string]string{"platform.yaml": replaceIn(t, base, "platform.yaml", "    - name: hub-eu\n", "    - name: hub-eu\n    - name: payments-hub\n")})
	rep = review(t, mgmt, with(mgmt, map[string]string{"clusters/payments-hub.yaml": replaceName(paymentsCluster, "payments-hub")}), "carol", memberOf("payments-sre"))
	require.Equal(t, NeedsPlatformAdmin, rep.Verdict, rep.Reasons)
	assert.Contains(t, rep.Files[0].Reason, "takes the name of management cluster payments-hub")

	// The team's own new name under its path stays its own.
	rep = review(t, base, with(base, map[string]string{"clusters/payments-3.yaml": replaceName(paymentsCluster, "payments-3")}), "carol", memberOf("payments-sre"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
}

// TestRetainedClusterRemovalIsRecorded: removing a cluster whose objects are retained is
// invalid until platform.yaml records its name in spec.retiredClusters.
func TestRetainedClusterRemovalIsRecorded(t *testing.T) {
	owned := provisionBase(t, map[string]string{"clusters/payments-eu-1.yaml": paymentsCluster})
	rep := review(t, owned, with(owned, map[string]string{"clusters/payments-eu-1.yaml": ""}), "alice", memberOf("platform"))
	require.Equal(t, Invalid, rep.Verdict)
	require.Len(t, rep.Issues, 1)
	assert.Contains(t, rep.Issues[0].Message, "cluster payments-eu-1 is removed (clusters/payments-eu-1.yaml) with deletionPolicy Retain")
	assert.Contains(t, rep.Issues[0].Hint, "retiredClusters: [payments-eu-1]")
	assert.Equal(t, "platform.yaml", rep.Issues[0].Pos.File)

	rep = review(t, owned, with(owned, map[string]string{"clusters/payments-eu-1.yaml": "", "platform.yaml": retire(t, owned, "payments-eu-1")}), "alice", memberOf("platform"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)

	deleted := provisionBase(t, map[string]string{"clusters/payments-eu-1.yaml": paymentsCluster + "    deletionPolicy: Delete\n"})
	rep = review(t, deleted, with(deleted, map[string]string{"clusters/payments-eu-1.yaml": ""}), "alice", memberOf("platform"))
	assert.Equal(t, Allowed, rep.Verdict, "a Delete cluster leaves nothing behind: %v", rep.Reasons)
}

func replaceName(s, name string) string { return strings.ReplaceAll(s, "payments-eu-1", name) }

func replaceIn(t *testing.T, m fstest.MapFS, file, old, new string) string {
	t.Helper()
	data := string(m[file].Data)
	require.Contains(t, data, old, file)
	return strings.ReplaceAll(data, old, new)
}

// TestDelegatedTeamMovesItsClusterBetweenWorkspaces: a team owning a cluster file by CODEOWNERS
// may not adopt the cluster into another team's workspace (that workspace's apps and secrets
// would run on a cluster the team administers), nor take it out of one, unless it is also a
// workspace admin there; platform admins may.
func TestDelegatedTeamMovesItsClusterBetweenWorkspaces(t *testing.T) {
	workspace := func(name, admins string) string {
		return "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: " + name + "\nspec:\n  admins: [" + admins + "]\n"
	}
	inWorkspace := func(ws string) string {
		return strings.Replace(paymentsCluster, "spec:\n", "spec:\n  workspace: "+ws+"\n", 1)
	}
	base := provisionBase(t, map[string]string{
		"workspaces/search.yaml":      workspace("search", "search-devs"),
		"workspaces/payments.yaml":    workspace("payments", "payments-sre"),
		"clusters/payments-eu-1.yaml": paymentsCluster,
	})
	for _, tc := range []struct {
		name, from, to string
		teams          []string
		allowed        bool
		reason         string
	}{
		{"into another team's workspace", "", "search", []string{"payments-sre"}, false,
			"clusters/payments-eu-1.yaml adopts it into workspace search (spec.workspace): the workspace's apps and their secrets run on every cluster of the workspace, whose admins hold cluster-admin there, so only platform admins or the workspace admins of search (search-devs) may change it"},
		{"into its own workspace", "", "payments", []string{"payments-sre"}, true, ""},
		{"out of another team's workspace", "search", "", []string{"payments-sre"}, false, "takes it out of workspace search"},
		{"from its own into another's", "payments", "search", []string{"payments-sre"}, false, "adopts it into workspace search"},
		{"admin of both", "payments", "search", []string{"payments-sre", "search-devs"}, true, ""},
		{"platform admin", "", "search", []string{"platform"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			if tc.from != "" {
				b = with(base, map[string]string{"clusters/payments-eu-1.yaml": inWorkspace(tc.from)})
			}
			to := paymentsCluster
			if tc.to != "" {
				to = inWorkspace(tc.to)
			}
			rep := review(t, b, with(b, map[string]string{"clusters/payments-eu-1.yaml": to}), "carol", memberOf(tc.teams...))
			require.Len(t, rep.Files, 1)
			if tc.allowed {
				assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
				return
			}
			assert.Equal(t, NeedsPlatformAdmin, rep.Verdict, rep.Reasons)
			assert.Contains(t, rep.Files[0].Reason, tc.reason)
		})
	}
}
