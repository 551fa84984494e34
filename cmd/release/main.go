// Command release builds a fleetbot release from a commit, reproducibly, without publishing
// anything (make release VERSION=vX.Y.Z; docs/versioning.md):
//
//   - a fleetbot binary per platform (CGO_ENABLED=0: static on linux, -trimpath, -buildvcs=false,
//     version and commit stamped with -ldflags), packed as a tar.gz with the README and the
//     CHANGELOG;
//   - a CycloneDX SBOM per binary, written by cyclonedx-gomod from the binary's build
//     information (the modules `go version -m` lists);
//   - the container image of the linux binaries as one OCI image layout in a tar: FROM scratch,
//     the static binary, a passwd entry for the non-root user 65532 and Debian's CA
//     certificates (deploy/image/rootfs), OCI labels;
//   - SHA256SUMS over every file.
//
// Every time and owner in these files comes from the commit (its committer time), never from
// the clock or the machine, so two runs on one commit with one Go release write the same bytes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/mod/semver"
)

// Defaults of the flags: the release's platforms, the image's source repository and licence.
const (
	defaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64"
	defaultSource    = "https://github.com/fleetbot-io/fleetbot"
	// defaultLicenses is SPDX's "no assertion": the repository has no LICENSE file yet. Set
	// -licenses (make release LICENSES=...) to its SPDX expression once it has one.
	defaultLicenses = "NOASSERTION"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the flags, builds the release and returns the exit status; tests call it with
// their own arguments and writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = release(ctx, cfg, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	return 0
}

// config is one release: what to build from where, and where to write it.
type config struct {
	// version is the release's semantic version, "v1.2.3" or "v1.2.3-rc.1".
	version string
	// src is the fleetbot checkout (the module root) the release is built from.
	src string
	// out is the directory the release's files are written to: out/<version>/.
	out string
	// platforms are the binaries' GOOS/GOARCH; the image holds the linux ones.
	platforms []platform
	// allowDirty builds a work tree with uncommitted changes (the tests); the commit is then
	// stamped "<sha>-dirty".
	allowDirty bool
	// goCmd is the go command; sbomTool the cyclonedx-gomod binary.
	goCmd, sbomTool string
	// source and licenses are the image's org.opencontainers.image.source and .licenses.
	source, licenses string
}

// platform is one GOOS/GOARCH pair.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// supported are the platforms a release may build: the ones the image and the Action know
// (the Action maps RUNNER_OS and RUNNER_ARCH onto these names).
var supported = []platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var platforms string
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.version, "version", "", "the release version, vMAJOR.MINOR.PATCH[-PRERELEASE] (required)")
	fs.StringVar(&cfg.src, "src", ".", "the fleetbot checkout to build")
	fs.StringVar(&cfg.out, "out", "dist", "write the release into DIR/<version>/")
	fs.StringVar(&platforms, "platforms", defaultPlatforms, "comma-separated GOOS/GOARCH of the binaries; the image holds the linux ones")
	fs.BoolVar(&cfg.allowDirty, "allow-dirty", false, "build a work tree with uncommitted changes (tests only: the commit is stamped <sha>-dirty)")
	fs.StringVar(&cfg.goCmd, "go", "go", "the go command")
	fs.StringVar(&cfg.sbomTool, "sbom-tool", "", "the cyclonedx-gomod binary (make release installs the pinned one into bin/)")
	fs.StringVar(&cfg.source, "source", defaultSource, "the image's org.opencontainers.image.source")
	fs.StringVar(&cfg.licenses, "licenses", defaultLicenses, "the image's org.opencontainers.image.licenses (an SPDX expression)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q: every input is a flag (-h lists them)", fs.Args())
	}
	if err := checkVersion(cfg.version); err != nil {
		return cfg, err
	}
	if cfg.sbomTool == "" {
		return cfg, errors.New("-sbom-tool is required: the cyclonedx-gomod binary (make release installs the pinned one)")
	}
	var err error
	if cfg.platforms, err = parsePlatforms(platforms); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// checkVersion accepts a semantic version with a "v", major, minor and patch, and an optional
// pre-release: what a git tag of a release looks like (no build metadata: "+" has no place in
// a file name or an image tag).
func checkVersion(v string) error {
	if v == "" {
		return errors.New("-version is required: make release VERSION=vMAJOR.MINOR.PATCH (e.g. v1.2.3 or v1.3.0-rc.1)")
	}
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE] (semver 2.0.0 with a leading v, e.g. v1.2.3 or v1.3.0-rc.1; no build metadata)", v)
	}
	return nil
}

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		goos, goarch, _ := strings.Cut(f, "/")
		p := platform{goos, goarch}
		if !slices.Contains(supported, p) {
			return nil, fmt.Errorf("-platforms: %q is not one of %s", f, defaultPlatforms)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("-platforms: %s is listed twice", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// release builds every artifact into a scratch directory beside the release directory, then
// moves it into place: an interrupted or failed run leaves no half release behind.
func release(ctx context.Context, cfg config, stdout io.Writer) error {
	src, err := readSource(ctx, cfg.src, cfg.allowDirty)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", cfg.out, err)
	}
	final := filepath.Join(cfg.out, cfg.version)
	tmp, err := os.MkdirTemp(cfg.out, "."+cfg.version+"-")
	if err != nil {
		return fmt.Errorf("creating a scratch directory in %s: %w", cfg.out, err)
	}
	defer os.RemoveAll(tmp)
	work, err := os.MkdirTemp("", "fleetbot-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	b := &builder{cfg: cfg, src: src, dir: tmp, work: work, log: stdout}
	if err := b.build(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("replacing %s: %w", final, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("moving the release into %s: %w", final, err)
	}
	fmt.Fprintf(stdout, "release %s of %s written to %s; verify with: (cd %s && sha256sum -c SHA256SUMS)\n", cfg.version, src.commit, final, final)
	return nil
}
