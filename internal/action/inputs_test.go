package action

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/ghaction"
)

func TestActionInputs(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	base := map[string]string{"GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "acme/control", "GITHUB_WORKSPACE": ws}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		errMsg string
		check  func(t *testing.T, in actionInputs)
	}{
		{name: "mode required", env: map[string]string{}, errMsg: "input mode is required"},
		{name: "bad mode", env: map[string]string{"INPUT_MODE": "destroy"}, errMsg: `input mode "destroy": want plan`},
		{name: "control-dir outside the workspace", env: map[string]string{"INPUT_MODE": "plan", "INPUT_CONTROL-DIR": "../elsewhere"}, errMsg: "is outside GITHUB_WORKSPACE"},
		{name: "app-id not a number", env: map[string]string{"INPUT_MODE": "plan", "INPUT_APP-ID": "fleetbot"}, errMsg: `input app-id "fleetbot": want the numeric GitHub App id`},
		{name: "app-id without key", env: map[string]string{"INPUT_MODE": "plan", "INPUT_APP-ID": "12"}, errMsg: "input app-id is set but private-key is empty"},
		{name: "key without app-id", env: map[string]string{"INPUT_MODE": "plan", "INPUT_PRIVATE-KEY": "-----BEGIN RSA PRIVATE KEY-----\nAAA\n-----END RSA PRIVATE KEY-----\n"}, errMsg: "input private-key is set but app-id is empty"},
		{name: "key neither PEM nor file", env: map[string]string{"INPUT_MODE": "plan", "INPUT_APP-ID": "12", "INPUT_PRIVATE-KEY": "not-a-key"}, errMsg: "neither a PEM private key"},
		{name: "allow-removals not a boolean", env: map[string]string{"INPUT_MODE": "apply", "INPUT_ALLOW-REMOVALS": "yes"}, errMsg: "input allow-removals"},
		{name: "defaults", env: map[string]string{"INPUT_MODE": "plan", "GITHUB_TOKEN": "ghs_w", "GITHUB_API_URL": "https://ghe.example.com/api/v3"}, check: func(t *testing.T, in actionInputs) {
			assert.Equal(t, ws, in.controlDir)
			assert.Equal(t, ".", in.controlRel)
			assert.Equal(t, "ghs_w", in.token)
			assert.False(t, in.hasFanout(), "GITHUB_TOKEN alone does not fan out")
			assert.Equal(t, "https://ghe.example.com/api/v3/", in.apiURL)
		}},
		{name: "github-url wins", env: map[string]string{"INPUT_MODE": "plan", "INPUT_GITHUB-URL": "https://ghe.example.com/api/v3/", "GITHUB_API_URL": "https://api.github.com"}, check: func(t *testing.T, in actionInputs) {
			assert.Equal(t, "https://ghe.example.com/api/v3/", in.apiURL)
		}},
		{name: "PAT in token fans out", env: map[string]string{"INPUT_MODE": "apply", "INPUT_TOKEN": "ghp_pat", "FLEETBOT_WORKFLOW_TOKEN": "ghs_w", "INPUT_ALLOW_REMOVALS": "true"}, check: func(t *testing.T, in actionInputs) {
			assert.Equal(t, "ghp_pat", in.fanoutToken)
			assert.Equal(t, "ghp_pat", in.token)
			assert.True(t, in.allowRemovals)
		}},
		{name: "FLEETBOT_FANOUT_TOKEN fans out", env: map[string]string{"INPUT_MODE": "apply", "INPUT_TOKEN": "ghs_w", "FLEETBOT_WORKFLOW_TOKEN": "ghs_w", "FLEETBOT_FANOUT_TOKEN": "ghp_x"}, check: func(t *testing.T, in actionInputs) {
			assert.Equal(t, "ghp_x", in.fanoutToken)
			assert.Equal(t, "ghs_w", in.token)
		}},
		{name: "nested control-dir", env: map[string]string{"INPUT_MODE": "plan", "INPUT_CONTROL-DIR": "./fleet/control/"}, check: func(t *testing.T, in actionInputs) {
			assert.Equal(t, "fleet/control", in.controlRel)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range tc.env {
				m[k] = v
			}
			env, err := ghaction.FromEnv(func(k string) string { return m[k] })
			require.NoError(t, err)
			var out bytes.Buffer
			in, err := readActionInputs(env, ghaction.NewCommands(&out))
			if tc.errMsg != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errMsg)
				assert.NotContains(t, err.Error(), "AAA", "the key never appears in an error")
				return
			}
			require.NoError(t, err)
			tc.check(t, in)
		})
	}
}
