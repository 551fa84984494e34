package fanout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestComponentOfPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"platform/metallb/kustomization.yaml":       "metallb",
		"platform/metallb/sub/file.yaml":            "metallb",
		"platform/" + TenancyPolicyFile:             "",
		"platform/kustomization.yaml":               "",
		"flux/fleetbot.yaml":                        "",
		"README.md":                                 "",
		"workspaces/search/platform/metallb/x.yaml": "",
	} {
		got, ok := ComponentOfPath(path)
		assert.Equal(t, want, got, path)
		assert.Equal(t, want != "", ok, path)
	}
}
