package github

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// TestAccessUnitsCoverPolicy: every access unit policy diffs has one entry in the GitHub
// forge's table, and every unit with a read of its own is read: a setting added to policy
// without its GitHub steps fails here, not on a live organization.
func TestAccessUnitsCoverPolicy(t *testing.T) {
	t.Parallel()
	have := map[policy.UnitName]int{}
	for _, u := range accessUnits {
		have[u.unit]++
		assert.True(t, u.give != nil || u.take != nil, "unit %s applies nothing", u.unit)
		if u.observe != nil {
			assert.Contains(t, accessReadOrder, u.unit, "unit %s is observed but never read", u.unit)
		}
	}
	for _, u := range policy.Units {
		assert.Equal(t, 1, have[u.Name()], "policy unit %s in the GitHub forge's table", u.Name())
	}
	assert.Len(t, accessUnits, len(policy.Units))
}
