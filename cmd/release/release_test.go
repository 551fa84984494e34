package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the fleetbot checkout the tests release.
var repoRoot = filepath.Join("..", "..")

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v0.1.0", "v1.2.3", "v10.20.30", "v1.3.0-rc.1", "v1.0.0-alpha.beta.1", "v2.0.0-0.3.7"} {
		assert.NoError(t, checkVersion(v), v)
	}
	for _, v := range []string{"", "1.2.3", "v1", "v1.2", "v1.2.3.4", "v01.2.3", "v1.02.3", "v1.2.3-", "v1.2.3-rc..1",
		"v1.2.3-01", "v1.2.3+build.5", "V1.2.3", "v1.2.3 ", " v1.2.3", "latest", "v1.2.3/../x"} {
		assert.Error(t, checkVersion(v), "%q is refused", v)
	}
}

// TestReleaseRefusesBadInput: a version that is not vMAJOR.MINOR.PATCH[-PRERELEASE], an unknown
// platform or a missing SBOM tool stop the release before anything is built or written.
func TestReleaseRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no version", []string{"-sbom-tool", "x"}, "-version is required"},
		{"no v", []string{"-version", "1.2.3", "-sbom-tool", "x"}, `version "1.2.3" is not vMAJOR.MINOR.PATCH[-PRERELEASE]`},
		{"shorthand", []string{"-version", "v1.2", "-sbom-tool", "x"}, "is not vMAJOR.MINOR.PATCH"},
		{"build metadata", []string{"-version", "v1.2.3+exp.sha.5114f85", "-sbom-tool", "x"}, "no build metadata"},
		{"path", []string{"-version", "v1.2.3/../../etc", "-sbom-tool", "x"}, "is not vMAJOR.MINOR.PATCH"},
		{"platform", []string{"-version", "v1.2.3", "-sbom-tool", "x", "-platforms", "windows/amd64"}, `"windows/amd64" is not one of`},
		{"platform twice", []string{"-version", "v1.2.3", "-sbom-tool", "x", "-platforms", "linux/amd64,linux/amd64"}, "listed twice"},
		{"no sbom tool", []string{"-version", "v1.2.3"}, "-sbom-tool is required"},
		{"argument", []string{"-version", "v1.2.3", "-sbom-tool", "x", "extra"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "dist")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(tc.args, "-out", out, "-src", repoRoot), &stdout, &stderr)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr.String(), tc.want)
			assert.NoDirExists(t, out, "nothing is written")
		})
	}
}

// TestReleaseRefusesADirtyTree: uncommitted changes, tracked or not, stop the release (naming
// the files) unless -allow-dirty; nothing is written.
func TestReleaseRefusesADirtyTree(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(src, "cmd", "bot"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "cmd", "bot", "main.go"), []byte("package main\n"), 0o644))
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-qm", "one")

	for name, dirty := range map[string]func(){
		"changed": func() {
			require.NoError(t, os.WriteFile(filepath.Join(src, "cmd", "bot", "main.go"), []byte("package main // x\n"), 0o644))
		},
		"untracked": func() { require.NoError(t, os.WriteFile(filepath.Join(src, "notes.txt"), []byte("x"), 0o644)) },
	} {
		git("checkout", "-q", ".")
		git("clean", "-qfd")
		dirty()
		out := filepath.Join(t.TempDir(), "dist")
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"-version", "v1.2.3", "-sbom-tool", "x", "-src", src, "-out", out}, &stdout, &stderr)
		assert.Equal(t, 1, code, name)
		assert.Contains(t, stderr.String(), "has uncommitted changes; a release is built from a commit", name)
		assert.Contains(t, stderr.String(), map[string]string{"changed": "cmd/bot/main.go", "untracked": "notes.txt"}[name], name)
		assert.NoDirExists(t, out, "%s: nothing is written", name)
	}
}

// sbomTool is the pinned cyclonedx-gomod: $FLEETBOT_SBOM_TOOL (make test sets it), else the
// one make installs into bin/ on first use.
func sbomTool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLEETBOT_SBOM_TOOL"); p != "" {
		return p
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "sbom-tool")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "installing the pinned SBOM tool (make sbom-tool; or set FLEETBOT_SBOM_TOOL): %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// TestRelease builds a release of this work tree twice (for the host's platform, and linux for
// the image) and checks what a user relies on: the checksums match the files, the two builds
// are byte-identical, the binary is static, stamped and free of build paths, the SBOM lists
// exactly the modules `go version -m` lists, and the image runs the released binary as the
// non-root user with the OCI labels.
func TestRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds fleetbot twice")
	}
	tool := sbomTool(t)
	host := platform{runtime.GOOS, runtime.GOARCH}
	platforms := []platform{host}
	if host.os != "linux" {
		platforms = append(platforms, platform{"linux", runtime.GOARCH})
	}
	var names []string
	for _, p := range platforms {
		names = append(names, p.String())
	}
	const version = "v1.2.3-test.1"
	args := func(out string) []string {
		return []string{"-version", version, "-src", repoRoot, "-out", out, "-platforms", strings.Join(names, ","),
			"-sbom-tool", tool, "-allow-dirty"}
	}
	// Both builds run the release command as its own process, built without the race detector
	// (under it, gzip and SHA-256 over the binaries take minutes). The second runs in another
	// time zone, umask and scratch directory, writing elsewhere: none of it may show in the files.
	out := t.TempDir()
	releaseCmd := filepath.Join(out, "release")
	cmd := exec.Command("go", "build", "-o", releaseCmd, ".")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "building cmd/release: %s", msg)
	msg, err = exec.Command(releaseCmd, args(filepath.Join(out, "a"))...).CombinedOutput()
	require.NoError(t, err, "the first release: %s", msg)
	first := filepath.Join(out, "a", version)
	cmd = exec.Command("sh", append([]string{"-c", `umask 077 && exec "$0" "$@"`, releaseCmd}, args(filepath.Join(out, "b", "dist"))...)...)
	cmd.Env = append(os.Environ(), "TZ=Pacific/Chatham", "TMPDIR="+t.TempDir())
	msg, err = cmd.CombinedOutput()
	require.NoError(t, err, "the second release: %s", msg)
	second := filepath.Join(out, "b", "dist", version)

	commit, commitTime := headCommit(t)
	b := &builder{cfg: config{version: version}}

	t.Run("checksums", func(t *testing.T) {
		sums := readSums(t, first)
		entries, err := os.ReadDir(first)
		require.NoError(t, err)
		var files []string
		for _, e := range entries {
			if e.Name() != sumsName {
				files = append(files, e.Name())
			}
		}
		assert.Equal(t, files, slices.Sorted(maps.Keys(sums)), "SHA256SUMS lists every file of the release, and only those")
		for name, want := range sums {
			got, err := fileSHA256(filepath.Join(first, name))
			require.NoError(t, err)
			assert.Equal(t, want, hex.EncodeToString(got), "%s matches SHA256SUMS", name)
		}
		want := []string{b.imageName()}
		for _, p := range platforms {
			want = append(want, b.archiveName(p), b.sbomName(p))
		}
		assert.ElementsMatch(t, want, files)
		if _, err := exec.LookPath("sha256sum"); err == nil {
			cmd := exec.Command("sha256sum", "-c", "--strict", sumsName)
			cmd.Dir = first
			out, err := cmd.CombinedOutput()
			assert.NoError(t, err, "sha256sum -c SHA256SUMS, as the README says: %s", out)
		}
	})

	t.Run("two builds are byte-identical", func(t *testing.T) {
		a, bb := dirFiles(t, first), dirFiles(t, second)
		require.Equal(t, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(bb)))
		for name := range a {
			assert.True(t, bytes.Equal(a[name], bb[name]), "%s differs between two builds of one commit", name)
		}
	})

	for _, p := range platforms {
		t.Run("binary "+p.String(), func(t *testing.T) {
			files := untarGz(t, filepath.Join(first, b.archiveName(p)))
			assert.Equal(t, []string{"CHANGELOG.md", "README.md", "fleetbot"}, slices.Sorted(maps.Keys(files)))
			for name, f := range files {
				assert.Equal(t, commitTime, f.hdr.ModTime.UTC(), "%s dated at the commit", name)
				assert.Zero(t, f.hdr.Uid+f.hdr.Gid, "%s owned by root", name)
				assert.Empty(t, f.hdr.Uname+f.hdr.Gname, "%s names no user", name)
			}
			assert.Equal(t, int64(0o755), files["fleetbot"].hdr.Mode)
			readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
			require.NoError(t, err)
			assert.Equal(t, readme, files["README.md"].body)
			exe := files["fleetbot"].body
			checkBinary(t, p, exe, version, commit)
			checkSBOM(t, filepath.Join(first, b.sbomName(p)), exe, version)
			if p == host {
				path := filepath.Join(t.TempDir(), "fleetbot")
				require.NoError(t, os.WriteFile(path, exe, 0o755))
				checkVersionOutput(t, path, version, commit, p)
			}
		})
	}

	t.Run("image", func(t *testing.T) {
		var linux []platform
		archives := map[platform][]byte{}
		for _, p := range platforms {
			if p.os == "linux" {
				linux = append(linux, p)
				archives[p] = untarGz(t, filepath.Join(first, b.archiveName(p)))["fleetbot"].body
			}
		}
		checkImage(t, filepath.Join(first, b.imageName()), version, commit, commitTime, linux, archives)
	})
}

// headCommit is what the release stamps: HEAD, "-dirty" when the work tree has changes, and
// its committer time.
func headCommit(t *testing.T) (string, time.Time) {
	t.Helper()
	src, err := readSource(context.Background(), repoRoot, true)
	require.NoError(t, err)
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repoRoot}, args...)...).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	if git("status", "--porcelain") != "" {
		commit += "-dirty"
	}
	require.Equal(t, commit, src.commit)
	return commit, src.time
}

// checkBinary: a static executable for p (no interpreter, no shared library), built with the
// release's flags, with no path of this machine in it.
func checkBinary(t *testing.T, p platform, exe []byte, version, commit string) {
	t.Helper()
	if p.os == "linux" {
		f, err := elf.NewFile(bytes.NewReader(exe))
		require.NoError(t, err)
		for _, prog := range f.Progs {
			assert.NotEqual(t, elf.PT_INTERP, prog.Type, "static: no program interpreter")
			assert.NotEqual(t, elf.PT_DYNAMIC, prog.Type, "static: no dynamic section")
		}
		libs, _ := f.ImportedLibraries()
		assert.Empty(t, libs, "static: no shared libraries")
		assert.Nil(t, f.Section(".symtab"), "-s: no symbol table")
	}
	settings := buildSettings(t, exe)
	assert.Equal(t, "0", settings["CGO_ENABLED"])
	assert.Equal(t, "true", settings["-trimpath"])
	assert.Equal(t, p.os, settings["GOOS"])
	assert.Equal(t, p.arch, settings["GOARCH"])
	// -trimpath keeps -ldflags out of the build information (it may hold paths); the stamped
	// version and commit are checked through `fleetbot version -o json` and in the image.
	assert.True(t, bytes.Contains(exe, []byte(version)), "the version is stamped")
	assert.True(t, bytes.Contains(exe, []byte(commit)), "the commit is stamped")
	assert.NotContains(t, settings, "vcs.revision", "-buildvcs=false: the commit comes from -ldflags")
	for _, leak := range leakPaths(t) {
		assert.False(t, bytes.Contains(exe, []byte(leak)), "the binary holds no path of the build machine: %s", leak)
	}
}

// leakPaths are directories of this machine a careless build embeds: the checkout, Go's root,
// the module cache, the home and temporary directories.
func leakPaths(t *testing.T) []string {
	t.Helper()
	src, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	out := []string{src}
	for _, v := range []string{"GOROOT", "GOMODCACHE", "GOCACHE"} {
		b, err := exec.Command("go", "env", v).Output()
		require.NoError(t, err)
		out = append(out, strings.TrimSpace(string(b)))
	}
	if home, err := os.UserHomeDir(); err == nil && len(home) > 1 {
		out = append(out, home+"/")
	}
	return out
}

// goVersionM runs `go version -m` on exe, as a user checking an SBOM would.
func goVersionM(t *testing.T, exe []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleetbot")
	require.NoError(t, os.WriteFile(path, exe, 0o755))
	out, err := exec.Command("go", "version", "-m", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// buildSettings are the "build" lines of `go version -m`.
func buildSettings(t *testing.T, exe []byte) map[string]string {
	t.Helper()
	settings := map[string]string{}
	for _, line := range strings.Split(goVersionM(t, exe), "\n") {
		f := strings.SplitN(strings.TrimSpace(line), "\t", 2)
		if len(f) == 2 && f[0] == "build" {
			k, v, _ := strings.Cut(f[1], "=")
			settings[k] = strings.Trim(v, `"`)
		}
	}
	return settings
}

// goModules are the modules `go version -m` lists: the main module's path, and every
// dependency as path@version (the replacement when it was replaced).
func goModules(t *testing.T, exe []byte) (string, []string) {
	t.Helper()
	var main string
	var deps []string
	for _, line := range strings.Split(goVersionM(t, exe), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "mod":
			main = f[1]
		case len(f) >= 3 && f[0] == "dep":
			deps = append(deps, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>":
			deps[len(deps)-1] = f[1] + "@" + f[2]
		}
	}
	require.NotEmpty(t, main)
	require.NotEmpty(t, deps)
	return main, deps
}

// checkSBOM: a CycloneDX document of the binary (its SHA-256), listing exactly the modules of
// `go version -m`, with nothing that changes from run to run.
func checkSBOM(t *testing.T, path string, exe []byte, version string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		BOMFormat    string `json:"bomFormat"`
		SpecVersion  string `json:"specVersion"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string           `json:"timestamp"`
			Tools     []map[string]any `json:"tools"`
			Component struct {
				Name, Version string
			} `json:"component"`
			Properties []struct{ Name, Value string } `json:"properties"`
		} `json:"metadata"`
		Components []struct {
			Type, Name, Version string
			Purl                string `json:"purl"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, "CycloneDX", doc.BOMFormat)
	assert.Equal(t, "1.6", doc.SpecVersion)
	assert.Empty(t, doc.SerialNumber, "no random serial number")
	assert.Empty(t, doc.Metadata.Timestamp, "no time of the run")
	require.Len(t, doc.Metadata.Tools, 1)
	assert.Equal(t, "cyclonedx-gomod", doc.Metadata.Tools[0]["name"])
	assert.NotContains(t, doc.Metadata.Tools[0], "hashes", "no hash of the machine's tool binary")

	main, deps := goModules(t, exe)
	assert.Equal(t, main, doc.Metadata.Component.Name)
	assert.Equal(t, version, doc.Metadata.Component.Version)
	var listed []string
	for _, c := range doc.Components {
		assert.Equal(t, "library", c.Type, c.Name)
		assert.True(t, strings.HasPrefix(c.Purl, "pkg:golang/"+c.Name+"@"+c.Version), c.Purl)
		listed = append(listed, c.Name+"@"+c.Version)
	}
	slices.Sort(listed)
	slices.Sort(deps)
	assert.Equal(t, deps, listed, "the SBOM lists exactly the modules of go version -m")

	sum := sha256.Sum256(exe)
	props := map[string]string{}
	for _, p := range doc.Metadata.Properties {
		props[p.Name] = p.Value
	}
	assert.Equal(t, hex.EncodeToString(sum[:]), props["cdx:gomod:binary:hash:SHA-256"], "the SBOM names the released binary")
	assert.Equal(t, runtime.Version(), props["cdx:gomod:build:env:GOVERSION"])
}

// checkVersionOutput: `fleetbot version -o json` of the released binary shows the version, the
// commit, the Go release and the platform; `fleetbot --version` prints what `version` prints.
func checkVersionOutput(t *testing.T, path, version, commit string, p platform) {
	t.Helper()
	out, err := exec.Command(path, "version", "-o", "json").Output()
	require.NoError(t, err)
	var doc struct {
		Command string `json:"command"`
		Build   struct {
			Version, Go, OS, Arch, Revision string
		} `json:"build"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	assert.Equal(t, "version", doc.Command)
	assert.Equal(t, version, doc.Build.Version)
	assert.Equal(t, commit, doc.Build.Revision)
	assert.Equal(t, runtime.Version(), doc.Build.Go)
	assert.Equal(t, p.os, doc.Build.OS)
	assert.Equal(t, p.arch, doc.Build.Arch)

	text, err := exec.Command(path, "version").Output()
	require.NoError(t, err)
	assert.Equal(t, "fleetbot "+version+"\n", string(text))
	flag, err := exec.Command(path, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, string(text), string(flag))
}

// checkImage reads the OCI archive as a registry client would (go-containerregistry's layout,
// digests and sizes validated) and checks each platform's image.
func checkImage(t *testing.T, archive, version, commit string, commitTime time.Time, platforms []platform, binaries map[platform][]byte) {
	t.Helper()
	dir := t.TempDir()
	entries := untar(t, archive)
	for name, f := range entries {
		assert.Equal(t, commitTime, f.hdr.ModTime.UTC(), "%s dated at the commit", name)
		if f.hdr.Typeflag == tar.TypeReg {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), f.body, 0o644))
		}
	}
	var top v1.IndexManifest
	require.NoError(t, json.Unmarshal(entries["index.json"].body, &top))
	require.Len(t, top.Manifests, 1, "index.json holds the release's image index")
	assert.Equal(t, version, top.Manifests[0].Annotations[refName], "the index is named by the version (oci-archive:FILE:VERSION)")

	root, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	idx, err := root.ImageIndex(top.Manifests[0].Digest)
	require.NoError(t, err)
	require.NoError(t, validate.Index(idx), "every digest and size in the image index holds")
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, len(platforms))

	wantLabels := map[string]string{
		"org.opencontainers.image.title":       "fleetbot",
		"org.opencontainers.image.description": "fleetbot serve: the GitHub App webhook service of fleetbot",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    commit,
		"org.opencontainers.image.source":      "https://github.com/fleetbot-io/fleetbot",
		"org.opencontainers.image.url":         "https://github.com/fleetbot-io/fleetbot",
		"org.opencontainers.image.licenses":    defaultLicenses,
		"org.opencontainers.image.created":     commitTime.Format(time.RFC3339),
	}
	assert.Equal(t, wantLabels, im.Annotations, "the index's annotations")
	for i, p := range platforms {
		desc := im.Manifests[i]
		require.NotNil(t, desc.Platform)
		assert.Equal(t, p.os, desc.Platform.OS)
		assert.Equal(t, p.arch, desc.Platform.Architecture)
		assert.Empty(t, desc.ArtifactType, "no artifactType: tools before OCI 1.1 would drop it and change the index's digest")
		img, err := idx.Image(desc.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, "65532:65532", cf.Config.User, "non-root")
		assert.Equal(t, []string{"/fleetbot"}, cf.Config.Entrypoint)
		assert.Equal(t, []string{"serve"}, cf.Config.Cmd)
		assert.Equal(t, wantLabels, cf.Config.Labels, "the image's labels")
		assert.Contains(t, cf.Config.ExposedPorts, "8080/tcp")
		assert.Equal(t, commitTime, cf.Created.UTC(), "created at the commit, not at the build")
		for _, h := range cf.History {
			assert.Equal(t, commitTime, h.Created.UTC())
		}
		m, err := img.Manifest()
		require.NoError(t, err)
		assert.Equal(t, wantLabels, m.Annotations, "the manifest's annotations")

		fs := flatten(t, img)
		require.Contains(t, fs, "fleetbot")
		assert.True(t, bytes.Equal(binaries[p], fs["fleetbot"].body), "%s: the binary in the image is the released binary", p)
		assert.Equal(t, int64(0o755), fs["fleetbot"].hdr.Mode)
		assert.Contains(t, string(fs["etc/passwd"].body), "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
		assert.Contains(t, string(fs["etc/group"].body), "\nnonroot:x:65532:\n")
		home := fs["home/nonroot/"].hdr
		require.NotNil(t, home)
		assert.Equal(t, 65532, home.Uid)
		assert.Equal(t, int64(0o700), home.Mode)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(fs["etc/ssl/certs/ca-certificates.crt"].body), "the CA bundle parses")
		certs := bytes.Count(fs["etc/ssl/certs/ca-certificates.crt"].body, []byte("-----BEGIN CERTIFICATE-----"))
		assert.Greater(t, certs, 100, "Debian's CA certificates, for serve's TLS to GitHub")
		assert.Contains(t, cf.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
		for name, f := range fs {
			assert.Equal(t, commitTime, f.hdr.ModTime.UTC(), "%s dated at the commit", name)
		}
	}
}

// tarFile is one entry of a tar.
type tarFile struct {
	hdr  *tar.Header
	body []byte
}

func readTar(t *testing.T, r io.Reader) map[string]tarFile {
	t.Helper()
	out := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		require.NotContains(t, out, h.Name, "one entry per name")
		out[h.Name] = tarFile{hdr: h, body: body}
	}
}

func untar(t *testing.T, path string) map[string]tarFile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return readTar(t, bufio.NewReader(f))
}

func untarGz(t *testing.T, path string) map[string]tarFile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	assert.True(t, zr.ModTime.IsZero(), "%s: no time in the gzip header", path)
	assert.Empty(t, zr.Name, "%s: no name in the gzip header", path)
	return readTar(t, zr)
}

// flatten is the image's file system, layer over layer (the release's layers neither replace
// nor delete a file).
func flatten(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 2, "a base layer and the binary")
	out := map[string]tarFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err)
		for name, f := range readTar(t, rc) {
			require.NotContains(t, out, name, "no layer replaces a file of another")
			out[name] = f
		}
		require.NoError(t, rc.Close())
	}
	return out
}

func readSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, sumsName))
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, "a SHA256SUMS line is <hex>  <name>: %q", line)
		require.Len(t, sum, 64, line)
		out[name] = sum
	}
	return out
}

func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}
