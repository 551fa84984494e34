package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bareMachineTools are the programs a bare machine of the README's promise has beyond Go and
// git: a POSIX base system (coreutils, bash, make, the tools scripts/test.sh uses). Everything
// else on this machine (npm and Node.js, jq, curl, Chromium, etcd, shellcheck, ...) is hidden
// from the set-up commands.
var hiddenFromABareMachine = map[string]bool{
	"npm": true, "npx": true, "node": true, "nodejs": true, "corepack": true, "jq": true, "curl": true,
	"wget": true, "chromium": true, "chromedriver": true, "etcd": true, "etcdctl": true, "shellcheck": true,
	"kubectl": true, "docker": true, "skopeo": true, "act": true, "python3": true,
}

// TestSetUpOnABareMachine runs the README's two set-up commands, as a new user runs them, on what
// the README says a machine needs: Go, git and a base system. HOME is empty (no git identity, no
// caches, no tools installed before), GOPATH is new (every module is downloaded again, from a
// proxy made of this machine's module cache, so the test stays offline), npm, Node.js, jq, curl,
// Chromium and the rest are not on PATH, and no .cache of the repository exists (GitHub's API
// descriptions come from the committed copies). `make test` runs on one small package: the point
// is what it needs before it runs a test (the SBOM tool it installs, vet, scripts/test.sh), not
// the tests it runs, which this very suite is.
func TestSetUpOnABareMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads every module into a new GOPATH and builds fleetbot (make test runs it)")
	}
	t.Parallel() // minutes of module copying and building: beside the documents, not after them
	// gcc: make test runs the race detector, which needs cgo (the README says so).
	for _, tool := range []string{"git", "make", "bash", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	modcache, gocache, goroot := goenv("GOMODCACHE"), goenv("GOCACHE"), goenv("GOROOT")
	if _, err := os.Stat(filepath.Join(modcache, "cache", "download")); err != nil {
		t.Skipf("no module download cache to serve as the module proxy: %v", err)
	}
	dir := repoCopy(t, root)
	home, gopath := t.TempDir(), t.TempDir()
	env := []string{
		"HOME=" + home, "GOPATH=" + gopath, "PATH=" + bareBin(t, goroot), "TMPDIR=" + t.TempDir(),
		// The module proxy: this machine's downloads, read as a proxy reads them. Modules are
		// checked against go.sum, as from any proxy; the tool make test installs (not in go.sum)
		// would consult the checksum database, which is network, so it is off.
		"GOPROXY=file://" + filepath.ToSlash(filepath.Join(modcache, "cache", "download")), "GOSUMDB=off",
		// The build cache is content-addressed: sharing it saves minutes of compiling and hides
		// nothing a set-up needs.
		"GOCACHE=" + gocache, "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false",
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s on a bare machine: %s", name, strings.Join(args, " "), tail(out, 6000))
		return string(out)
	}

	out := run("go", "run", "./cmd/bot", "apply", "--control", "testdata/control", "--forge", "local:.fleetbot/forge")
	assert.Contains(t, out, "6 repos: 6 create", "the first command creates the example's six repos")
	assert.DirExists(t, filepath.Join(dir, ".fleetbot", "forge", "acme", "cluster-prod-eu-1.git"))

	out = run("make", "test", "PKGS=./internal/yamlsize")
	assert.Contains(t, out, "ok  \tgithub.com/fleetbot-io/fleetbot/internal/yamlsize")
	assert.NoDirExists(t, filepath.Join(dir, ".cache", "github-schemas"), "make test needs no npm package")
}

// bareBin is a PATH of one directory: Go's own bin and this machine's /usr/bin and /bin,
// without hiddenFromABareMachine.
func bareBin(t *testing.T, goroot string) string {
	t.Helper()
	bin := t.TempDir()
	for _, src := range []string{filepath.Join(goroot, "bin"), "/usr/local/bin", "/usr/bin", "/bin"} {
		entries, err := os.ReadDir(src)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if hiddenFromABareMachine[e.Name()] {
				continue
			}
			link := filepath.Join(bin, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // the first directory wins, as on a PATH
			}
			require.NoError(t, os.Symlink(filepath.Join(src, e.Name()), link))
		}
	}
	return bin
}
