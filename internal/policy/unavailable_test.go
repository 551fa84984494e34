package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A default branch the forge cannot protect (GitHub Free, private repo) is not planned for
// protection on every run: the teams still converge.
func TestDiffSkipsUnavailableProtection(t *testing.T) {
	desired := Access{Teams: map[string]Role{"platform": RoleAdmin}, Protection: DefaultProtection("main")}
	observed := Access{Teams: map[string]Role{}, ProtectionUnavailable: "Upgrade to GitHub Pro or make this repository public to enable this feature."}
	p := Diff(desired, observed, DiffOptions{})
	assert.Nil(t, p.Protection)
	assert.Empty(t, p.ProtectionDrift)
	assert.Len(t, p.Grants, 1)

	observed.ProtectionUnavailable = ""
	assert.NotNil(t, Diff(desired, observed, DiffOptions{}).Protection, "available: protected as ever")
}
