package fanout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// TestHealthObjectsOnlyWithWaves: a platform with rollout waves gets, in every cluster repo's
// flux/fleetbot.yaml, the github Provider (addressed to that cluster repo) and the Alert of
// flux-system's Kustomizations that make Flux post the commit statuses the waves wait for;
// without waves nothing is added (the goldens prove the rest is unchanged).
func TestHealthObjectsOnlyWithWaves(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		assert.NotContains(t, string(tg.Files[FluxPath]), "kind: Provider", tg.Repo)
	}
	repo.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
	n := 0
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindCluster {
			continue
		}
		n++
		docs := strings.Split(string(tg.Files[FluxPath]), "\n---\n")
		var provider, alert map[string]any
		for _, d := range docs {
			var m map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(d), &m), tg.Repo)
			switch m["kind"] {
			case "Provider":
				provider = m
			case "Alert":
				alert = m
			}
		}
		require.NotNil(t, provider, tg.Repo)
		require.NotNil(t, alert, tg.Repo)
		spec := provider["spec"].(map[string]any)
		assert.Equal(t, "github", spec["type"])
		assert.Equal(t, DefaultGitURL+"/"+tg.Owner+"/"+tg.Repo, spec["address"])
		assert.Equal(t, map[string]any{"name": HealthSecret}, spec["secretRef"])
		assert.Equal(t, []any{map[string]any{"kind": "Kustomization", "name": "*", "namespace": FluxNamespace}},
			alert["spec"].(map[string]any)["eventSources"])
	}
	assert.Positive(t, n)
}
