package review

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApprovalByCodeowners: a commit approving a wave (rollout/approvals/<wave>.yaml) is judged
// by its author against the base's CODEOWNERS: a team or user named there approves, anyone
// else (a platform admin too) does not; an approval file nobody owns stays the platform
// admins'.
func TestApprovalByCodeowners(t *testing.T) {
	t.Parallel()
	base := provisionBase(t, nil)
	base[".github/CODEOWNERS"] = &fstest.MapFile{Data: []byte("* @acme/platform\n/rollout/approvals/prod.yaml @acme/release-managers @Octo-Approver\n")}
	approve := with(base, map[string]string{"rollout/approvals/prod.yaml": "digest: sha256:" + strings.Repeat("a", 64) + "\n"})

	rep := review(t, base, approve, "dave", memberOf("release-managers"))
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	require.Len(t, rep.Files, 1)
	assert.Equal(t, "team release-managers approves wave prod: it owns rollout/approvals/prod.yaml by .github/CODEOWNERS (/rollout/approvals/prod.yaml)", rep.Files[0].Reason)

	rep = review(t, base, approve, "octo-approver", memberOf())
	assert.Equal(t, Allowed, rep.Verdict, rep.Reasons)
	assert.Contains(t, rep.Files[0].Reason, "octo-approver approves wave prod: a code owner of rollout/approvals/prod.yaml")

	rep = review(t, base, approve, "alice", memberOf("platform"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict, "a platform admin who is not a code owner of the approval does not approve")
	assert.Equal(t, "only the code owners of rollout/approvals/prod.yaml by .github/CODEOWNERS (/rollout/approvals/prod.yaml) (@acme/release-managers, @Octo-Approver) may approve wave prod", rep.Files[0].Reason)

	other := with(base, map[string]string{"rollout/approvals/canary.yaml": "digest: sha256:" + strings.Repeat("a", 64) + "\n"})
	rep = review(t, base, other, "alice", memberOf("platform"))
	assert.Equal(t, Allowed, rep.Verdict, "owned by * @acme/platform: the platform admins approve")
	rep = review(t, base, other, "dave", memberOf("release-managers"))
	assert.Equal(t, NeedsPlatformAdmin, rep.Verdict)
}
