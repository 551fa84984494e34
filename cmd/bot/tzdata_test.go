package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTimeZoneDatabaseEmbedded: the fleetbot binary carries the time zone database, so a change
// window's timeZone resolves on an image without one (the release image is FROM scratch).
func TestTimeZoneDatabaseEmbedded(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(out)), "time/tzdata", "cmd/bot imports time/tzdata")
}
