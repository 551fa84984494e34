package pr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMarkerWaves: the lists of rollout waves round-trip through a body's marker; a marker
// without them (every pull request before per-component waves) reads as none.
func TestMarkerWaves(t *testing.T) {
	m := marker{Head: "abc", Source: "s1", Waves: []string{"component metallb", "spec.rollout.waves"}}
	body := withMarker("Sync of cluster c1.\n", m)
	assert.Equal(t, []string{"component metallb", "spec.rollout.waves"}, WavesOf(body))
	assert.Equal(t, "s1", SourceOf(body))
	assert.Nil(t, WavesOf(withMarker("x", marker{Head: "abc"})))
	assert.NotContains(t, marker{Head: "abc"}.String(), "waves")
}
