package local

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// TestLocalUnitsCoverPolicy: every access unit policy diffs is observed and stored by the local
// forge, and what is stored is what is observed again: a setting added to policy without its
// place in the settings file fails here.
func TestLocalUnitsCoverPolicy(t *testing.T) {
	t.Parallel()
	have := map[policy.UnitName]int{}
	for _, u := range localUnits {
		have[u.unit]++
	}
	for _, u := range policy.Units {
		assert.Equal(t, 1, have[u.Name()], "policy unit %s in the local forge's table", u.Name())
	}
	assert.Len(t, localUnits, len(policy.Units))

	a := policy.Access{Teams: map[string]policy.Role{"platform": policy.RoleAdmin}, Collaborators: map[string]policy.Role{"alice": policy.RolePush},
		Protection: policy.DefaultProtection("main"), AllowAutoMerge: true}
	var s settings
	s.setAccess(a)
	assert.Equal(t, a, s.access())
}
