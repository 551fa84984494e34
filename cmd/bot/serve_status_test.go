package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusToken is the bearer token of the status pages in these tests.
const statusToken = "status-token-for-tests-0123456789"

func TestServeStatusConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	writeFile(t, short, "abc\n")
	good := filepath.Join(dir, "good")
	writeFile(t, good, statusToken+"\n")
	for _, tc := range []struct {
		f    statusPageFlags
		want string
	}{
		{statusPageFlags{enabled: true, groupBy: "kind"}, "--status needs --status-token-file FILE"},
		{statusPageFlags{tokenFile: good, groupBy: "kind"}, "add --status"},
		{statusPageFlags{enabled: true, tokenFile: short, groupBy: "kind"}, "the token is 3 bytes"},
		{statusPageFlags{enabled: true, tokenFile: filepath.Join(dir, "missing"), groupBy: "kind"}, "reading the status token"},
		{statusPageFlags{enabled: true, insecure: true, groupBy: "waves"}, "--status-group-by"},
	} {
		_, err := tc.f.config()
		assert.ErrorContains(t, err, tc.want, "%+v", tc.f)
		if err != nil {
			assert.NotContains(t, err.Error(), statusToken, "the token is never echoed")
		}
	}
	c, err := (&statusPageFlags{enabled: true, tokenFile: good, groupBy: "kind"}).config()
	require.NoError(t, err)
	assert.Equal(t, []byte(statusToken), c.Token)
	c, err = (&statusPageFlags{}).config()
	require.NoError(t, err)
	assert.False(t, c.Enabled, "off unless enabled")
}
