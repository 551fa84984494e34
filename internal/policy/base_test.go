package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBaseRoleCoversOnlyReadOnlyGrants: a missing team whose read-only role the org's base role
// gives every member is not granted; push and above always are (a code-owner team needs write
// access of its own), and so is every team when the base role is unknown.
func TestBaseRoleCoversOnlyReadOnlyGrants(t *testing.T) {
	desired := Access{Teams: map[string]Role{"readers": RolePull, "triagers": RoleTriage, "devs": RolePush, "admins": RoleAdmin}}
	for _, tc := range []struct {
		base Role
		want []string
	}{
		{"", []string{"admins", "devs", "readers", "triagers"}},
		{RolePull, []string{"admins", "devs", "triagers"}},
		{RolePush, []string{"admins", "devs"}},
		{RoleAdmin, []string{"admins", "devs"}},
	} {
		p := Diff(desired, Access{Teams: map[string]Role{}}, DiffOptions{BaseRole: tc.base})
		var got []string
		for _, g := range p.Grants {
			got = append(got, g.Name)
		}
		assert.Equal(t, tc.want, got, "base %q", tc.base)
		assert.Len(t, TeamsToGrant(desired.Teams, tc.base), len(tc.want), "base %q", tc.base)
	}
	// A read-only team already granted stays: covered is not drift either way.
	p := Diff(desired, Access{Teams: map[string]Role{"readers": RolePull, "devs": RolePush, "admins": RoleAdmin}}, DiffOptions{BaseRole: RolePull})
	assert.Empty(t, p.Revokes)
}
