package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct{ cmd, args string }

// parseDockerfile splits a Dockerfile into its stages' instructions (comments dropped, lines
// ending in "\" joined).
func parseDockerfile(t *testing.T, text string) [][]dockerInstruction {
	t.Helper()
	var stages [][]dockerInstruction
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "the Dockerfile starts with FROM")
		stages[len(stages)-1] = append(stages[len(stages)-1], dockerInstruction{cmd, strings.TrimSpace(args)})
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// TestDockerfileMatchesTheReleaseImage keeps the Dockerfile, for people who build with Docker,
// alike the image make release builds without it: the same go build flags, no base image, the
// same files besides the binary, user, entrypoint, command, port and labels.
func TestDockerfileMatchesTheReleaseImage(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	stages := parseDockerfile(t, string(raw))
	require.Len(t, stages, 2, "a build stage and the image")
	build, final := stages[0], stages[1]

	var goBuild string
	var env []string
	for _, in := range build {
		switch in.cmd {
		case "RUN":
			if strings.HasPrefix(in.args, "go build") {
				goBuild = in.args
			}
		case "ENV":
			env = append(env, strings.Fields(in.args)...)
		}
	}
	assert.Contains(t, env, "CGO_ENABLED=0", "static, as the release")
	b := &builder{cfg: config{version: "${VERSION}"}, src: source{commit: "${COMMIT}"}}
	assert.Equal(t, `go build -trimpath -buildvcs=false -ldflags "`+b.ldflags()+`" -o /out/fleetbot ./cmd/bot`, goBuild,
		"the Dockerfile builds with the release's flags")

	assert.Equal(t, "scratch", final[0].args, "no base image: the release's image has none")
	got := map[string][]string{}
	labels := map[string]string{}
	label := regexp.MustCompile(`(\S+)="([^"]*)"`)
	for _, in := range final[1:] {
		got[in.cmd] = append(got[in.cmd], in.args)
		if in.cmd == "LABEL" {
			for _, m := range label.FindAllStringSubmatch(in.args, -1) {
				labels[m[1]] = m[2]
			}
		}
	}
	assert.Equal(t, []string{imageUser}, got["USER"])
	assert.Equal(t, []string{imageHome}, got["WORKDIR"])
	assert.Equal(t, []string{strings.TrimSuffix(imagePort, "/tcp")}, got["EXPOSE"])
	assert.Equal(t, []string{"SSL_CERT_FILE=" + imageCerts}, got["ENV"])
	assert.Equal(t, []string{jsonArray(t, imageEntrypoint)}, got["ENTRYPOINT"])
	assert.Equal(t, []string{jsonArray(t, imageCmd)}, got["CMD"])
	assert.Equal(t, []string{"--from=build /rootfs/ /", "--from=build /out/fleetbot " + imageEntrypoint}, got["COPY"])
	var rootfs string
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "/rootfs") {
			rootfs = in.args
		}
	}
	assert.Contains(t, rootfs, "cp -R "+rootfsDir+"/. /rootfs/", "the image's files are the release's")
	assert.Contains(t, rootfs, "chown 65532:65532 /rootfs"+imageHome)
	assert.Contains(t, rootfs, "chmod 0700 /rootfs"+imageHome)
	assert.Contains(t, rootfs, "chmod 1777 /rootfs/tmp")

	want := (&builder{cfg: config{version: "${VERSION}", source: defaultSource, licenses: defaultLicenses},
		src: source{commit: "${COMMIT}", time: time.Unix(0, 0)}}).labels()
	want["org.opencontainers.image.created"] = "${CREATED}"
	assert.Equal(t, want, labels, "the Dockerfile's labels are the release image's")
}

func jsonArray(t *testing.T, s ...string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}
