package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// installScript is the Action's first step (action.yml).
var installScript = filepath.Join(repoRoot, "scripts", "action-install.sh")

// fakeRelease is a GitHub release as the Action downloads it: SHA256SUMS and an archive named
// and packed as cmd/release does, whose fleetbot is a script answering `version -o json`.
type fakeRelease struct {
	version, commit string
	// claims is the version the binary says it is (default: version).
	claims string
	// corrupt writes a wrong SHA-256 into SHA256SUMS; omit leaves the archive's line out.
	corrupt, omit bool
}

func (r fakeRelease) files(t *testing.T, platforms ...platform) map[string][]byte {
	t.Helper()
	b := &builder{cfg: config{version: r.version}}
	claims := r.claims
	if claims == "" {
		claims = r.version
	}
	other := sha256.Sum256([]byte("other"))
	sums := fmt.Sprintf("%x  %s\n", other, b.imageName())
	out := map[string][]byte{}
	for _, p := range platforms {
		archive, sum := r.archive(t, claims)
		if r.corrupt {
			sum[0] ^= 0xff
		}
		if !r.omit {
			sums += fmt.Sprintf("%x  %s\n", sum, b.archiveName(p))
		}
		out[b.archiveName(p)] = archive
	}
	out[sumsName] = []byte(sums)
	return out
}

// archive is a release archive whose fleetbot says it is version claims of r.commit.
func (r fakeRelease) archive(t *testing.T, claims string) ([]byte, [32]byte) {
	t.Helper()
	exe := fmt.Sprintf("#!/bin/sh\n[ \"$1 $2 $3\" = \"version -o json\" ] || exit 2\n"+
		"printf '{\\n  \"format_version\": 1,\\n  \"command\": \"version\",\\n  \"build\": {\\n    \"version\": \"%s\",\\n    \"revision\": \"%s\"\\n  }\\n}\\n'\n",
		claims, r.commit)
	var archive bytes.Buffer
	require.NoError(t, writeTarGz(&archive, time.Unix(0, 0), []tarEntry{
		{name: binaryName, mode: 0o755, body: []byte(exe)}, {name: "README.md", mode: 0o644, body: []byte("x")},
	}))
	return archive.Bytes(), sha256.Sum256(archive.Bytes())
}

// releaseServer serves releases at /<tag>/<file> on 127.0.0.1 and counts the requests.
type releaseServer struct {
	url      string
	requests atomic.Int64
	// mu guards files: the test adds releases while the server may answer (the requests come
	// from curl processes, an order the race detector cannot see).
	mu    sync.Mutex
	files map[string][]byte
}

func (s *releaseServer) file(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[name]
	return b, ok
}

func newReleaseServer(t *testing.T) *releaseServer {
	t.Helper()
	s := &releaseServer{files: map[string][]byte{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		b, ok := s.file(strings.TrimPrefix(r.URL.Path, "/"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.url = "http://" + ln.Addr().String()
	return s
}

func (s *releaseServer) add(t *testing.T, r fakeRelease, platforms ...platform) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, b := range r.files(t, platforms...) {
		s.files[r.version+"/"+name] = b
	}
}

// tagRepo is a git repository with tags, as `git ls-remote` of the action's repository shows
// them: commit returns the commit a new empty commit made, tag tags it (annotated or not).
type tagRepo struct {
	t   *testing.T
	dir string
}

func newTagRepo(t *testing.T) *tagRepo {
	r := &tagRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *tagRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func (r *tagRepo) commit(msg string) string {
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// installRun is one run of the install step.
type installRun struct {
	code          int
	log, outputs  string
	binary        []byte
	binaryPresent bool
}

func install(t *testing.T, env map[string]string) installRun {
	t.Helper()
	tmp := t.TempDir()
	out := filepath.Join(tmp, "github_output")
	base := map[string]string{
		"RUNNER_OS": "Linux", "RUNNER_ARCH": "X64", "RUNNER_TEMP": tmp, "GITHUB_OUTPUT": out,
		"GITHUB_SERVER_URL": "http://127.0.0.1:9", "FLEETBOT_ACTION_REPOSITORY": "fleetbot-io/fleetbot",
		"FLEETBOT_ACTION_PATH": repoRoot, "PATH": os.Getenv("PATH"), "HOME": tmp,
	}
	for k, v := range env {
		base[k] = v
	}
	cmd := exec.Command("bash", installScript)
	for k, v := range base {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	log, err := cmd.CombinedOutput()
	run := installRun{log: string(log)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running %s: %v", installScript, err)
		run.code = ee.ExitCode()
	}
	if b, err := os.ReadFile(out); err == nil {
		run.outputs = string(b)
	}
	if b, err := os.ReadFile(filepath.Join(tmp, "fleetbot-action", "fleetbot")); err == nil {
		run.binary, run.binaryPresent = b, true
	}
	return run
}

// TestActionInstallsTheReleasedBinary runs the Action's install step against releases served on
// 127.0.0.1 and tags in a local git repository: a release tag runs the release's binary of
// that commit, verified against SHA256SUMS; anything wrong fails closed with no binary left; a
// ref that is not a release tag, or build-from-source, builds from source without a download.
func TestActionInstallsTheReleasedBinary(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the Action's install step is a bash script")
	}
	repo := newTagRepo(t)
	old := repo.commit("v1.2.2")
	repo.git("tag", "v1.2.2")
	cur := repo.commit("v1.2.3")
	repo.git("tag", "v1.2.3-rc.1")
	repo.git("tag", "-a", "-m", "release v1.2.3", "v1.2.3") // annotated: ls-remote peels it
	repo.git("tag", "v1.2")
	repo.git("tag", "-f", "v1")
	next := repo.commit("not released")
	repo.git("tag", "v2")
	repo.git("tag", "v3.0.0") // tagged, never released (no files on the server)

	srv := newReleaseServer(t)
	linux := platform{"linux", "amd64"}
	srv.add(t, fakeRelease{version: "v1.2.2", commit: old}, linux)
	srv.add(t, fakeRelease{version: "v1.2.3", commit: cur}, linux, platform{"darwin", "arm64"})
	released, _ := srv.file("v1.2.3/" + (&builder{cfg: config{version: "v1.2.3"}}).archiveName(linux))

	env := func(kv ...string) map[string]string {
		m := map[string]string{"FLEETBOT_GIT_URL": repo.dir, "FLEETBOT_RELEASES_URL": srv.url}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	unpacked := untarGzBytes(t, released)[binaryName]

	for _, tc := range []struct {
		name string
		env  map[string]string
		log  string
	}{
		{"a release", env("FLEETBOT_ACTION_REF", "v1.2.3"), "release v1.2.3 (" + cur + ") for linux/amd64"},
		{"the major tag runs the release on its commit", env("FLEETBOT_ACTION_REF", "v1"), "release v1.2.3 (" + cur + ")"},
		{"a minor tag", env("FLEETBOT_ACTION_REF", "v1.2"), "release v1.2.3 (" + cur + ")"},
		{"macOS on ARM64", env("FLEETBOT_ACTION_REF", "v1.2.3", "RUNNER_OS", "macOS", "RUNNER_ARCH", "ARM64"), "for darwin/arm64"},
		{"the ref from the action's path", env("FLEETBOT_ACTION_REPOSITORY", "", "FLEETBOT_ACTION_PATH", "/home/runner/work/_actions/fleetbot-io/fleetbot/v1"),
			"release v1.2.3 (" + cur + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := install(t, tc.env)
			require.Equal(t, 0, r.code, r.log)
			assert.Contains(t, r.log, tc.log)
			assert.Contains(t, r.log, "as SHA256SUMS lists it")
			assert.Equal(t, "build=false\n", r.outputs)
			require.True(t, r.binaryPresent, "the release binary is installed")
			if tc.env["RUNNER_OS"] == "" {
				assert.Equal(t, unpacked, r.binary, "the binary is the one of the verified archive")
			}
		})
	}

	before := srv.requests.Load()
	for _, tc := range []struct {
		name string
		env  map[string]string
		log  string
	}{
		{"build-from-source", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_BUILD_FROM_SOURCE", "true"), "build-from-source is true"},
		{"a branch", env("FLEETBOT_ACTION_REF", "main"), "the action's ref 'main' is not a release tag"},
		{"a commit SHA", env("FLEETBOT_ACTION_REF", cur), "the action's ref '" + cur + "' is not a release tag"},
		{"a local action", env("FLEETBOT_ACTION_REF", "", "FLEETBOT_ACTION_REPOSITORY", ""), "the action's ref '' is not a release tag"},
		{"a branch named like a version", env("FLEETBOT_ACTION_REF", "v1.2.x"), "is not a release tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, tc.env)
			require.Equal(t, 0, r.code, r.log)
			assert.Contains(t, r.log, tc.log)
			assert.Contains(t, r.log, "building fleetbot from the action's source")
			assert.Equal(t, "build=true\n", r.outputs, "the next steps build it")
			assert.False(t, r.binaryPresent)
		})
	}
	assert.Equal(t, before, srv.requests.Load(), "building from source downloads nothing")

	// Fails closed: an error naming what is wrong, no binary, no build=true.
	bad := newReleaseServer(t)
	bad.add(t, fakeRelease{version: "v1.2.3", commit: cur, corrupt: true}, linux)
	omitted := newReleaseServer(t)
	omitted.add(t, fakeRelease{version: "v1.2.3", commit: cur, omit: true}, linux)
	liar := newReleaseServer(t)
	liar.add(t, fakeRelease{version: "v1.2.3", commit: old}, linux)
	other := newReleaseServer(t)
	other.add(t, fakeRelease{version: "v1.2.3", commit: cur, claims: "v1.2.2"}, linux)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"checksum mismatch", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_RELEASES_URL", bad.url), "checksum mismatch for fleetbot_1.2.3_linux_amd64.tar.gz of release v1.2.3"},
		{"no checksum", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_RELEASES_URL", omitted.url), "SHA256SUMS of release v1.2.3 has no single SHA-256 for fleetbot_1.2.3_linux_amd64.tar.gz"},
		{"another commit", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_RELEASES_URL", liar.url), "the fleetbot of fleetbot_1.2.3_linux_amd64.tar.gz is not release v1.2.3 of commit " + cur + `: it says {"format_version":1,"command":"version","build":{"version":"v1.2.3","revision":"` + old},
		{"another version", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_RELEASES_URL", other.url), "the fleetbot of fleetbot_1.2.3_linux_amd64.tar.gz is not release v1.2.3"},
		{"no release", env("FLEETBOT_ACTION_REF", "v3.0.0"), "cannot download SHA256SUMS of release v3.0.0"},
		{"no such tag", env("FLEETBOT_ACTION_REF", "v9.9.9"), "tag v9.9.9 does not exist"},
		{"a major tag with no release on its commit", env("FLEETBOT_ACTION_REF", "v2"), "v2 (commit " + next + ") is not a release"},
		{"no binary for the runner", env("FLEETBOT_ACTION_REF", "v1.2.3", "RUNNER_OS", "Windows"), "no binary for runner OS 'Windows'"},
		{"no binary for the architecture", env("FLEETBOT_ACTION_REF", "v1.2.3", "RUNNER_ARCH", "ARM"), "no binary for runner architecture 'ARM'"},
		{"no platform archive", env("FLEETBOT_ACTION_REF", "v1.2.3", "RUNNER_ARCH", "ARM64"), "has no single SHA-256 for fleetbot_1.2.3_linux_arm64.tar.gz"},
		{"tags out of reach", env("FLEETBOT_ACTION_REF", "v1.2.3", "FLEETBOT_GIT_URL", filepath.Join(t.TempDir(), "none")), "cannot list the tags of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := install(t, tc.env)
			assert.Equal(t, 1, r.code, r.log)
			assert.Contains(t, r.log, "::error title=fleetbot::", "an error annotation")
			assert.Contains(t, r.log, tc.want)
			assert.NotContains(t, r.outputs, "build=true", "never builds instead unless asked")
			assert.False(t, r.binaryPresent, "no binary is left to run")
		})
	}
}

func untarGzBytes(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.tar.gz")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	out := map[string][]byte{}
	for name, f := range untarGz(t, path) {
		out[name] = f.body
	}
	return out
}
