package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// builder writes one release into dir.
type builder struct {
	cfg config
	src source
	// dir receives the release's files; work holds the binaries while they are packed.
	dir, work string
	log       io.Writer
}

// Names of the release's files. A name carries the version without its "v", as archives of
// Go tools usually do (fleetbot_1.2.3_linux_amd64.tar.gz).
const (
	binaryName = "fleetbot"
	sumsName   = "SHA256SUMS"
)

func (b *builder) base() string { return "fleetbot_" + strings.TrimPrefix(b.cfg.version, "v") }

// archiveName is the tar.gz of p's binary; the Action downloads it.
func (b *builder) archiveName(p platform) string {
	return fmt.Sprintf("%s_%s_%s.tar.gz", b.base(), p.os, p.arch)
}

func (b *builder) sbomName(p platform) string {
	return fmt.Sprintf("%s_%s_%s.sbom.cdx.json", b.base(), p.os, p.arch)
}

func (b *builder) imageName() string { return b.base() + "_oci-image.tar" }

// build writes every artifact, then SHA256SUMS over them.
func (b *builder) build(ctx context.Context) error {
	binaries := map[platform]string{}
	for _, p := range b.cfg.platforms {
		bin, err := b.compile(ctx, p)
		if err != nil {
			return err
		}
		binaries[p] = bin
		if err := b.archive(p, bin); err != nil {
			return err
		}
		if err := b.sbom(ctx, p, bin); err != nil {
			return err
		}
	}
	var linux []platform
	for _, p := range b.cfg.platforms {
		if p.os == "linux" {
			linux = append(linux, p)
		}
	}
	if len(linux) > 0 {
		if err := b.image(linux, binaries); err != nil {
			return err
		}
	}
	return b.sums()
}

// ldflags stamps the version and the commit (`fleetbot version -o json` shows both) and drops
// the symbol table and DWARF, as the Dockerfile and the Action's source build do.
func (b *builder) ldflags() string {
	return fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", b.cfg.version, b.src.commit)
}

// compile builds fleetbot for p: static (no cgo), no file system path in it (-trimpath), no
// VCS stamping (-buildvcs=false: the commit comes in through -ldflags, so the binary does not
// depend on the .git directory's state), in an environment where nothing of the caller's
// go env changes what the compiler produces.
func (b *builder) compile(ctx context.Context, p platform) (string, error) {
	out := filepath.Join(b.work, p.os+"_"+p.arch, binaryName)
	cmd := exec.CommandContext(ctx, b.cfg.goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags="+b.ldflags(), "-o", out, "./cmd/bot")
	cmd.Dir, cmd.Env = b.src.dir, buildEnv(p)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fleetbot for %s: %w\n%s", p, err, msg)
	}
	fmt.Fprintf(b.log, "built %s %s\n", binaryName, p)
	return out, nil
}

// buildEnv is the go command's environment for p: the caller's (for GOCACHE, GOMODCACHE,
// GOPROXY, HOME, PATH) less every variable that changes what is compiled, then the release's
// own values of those.
func buildEnv(p platform) []string {
	drop := []string{"GOFLAGS", "GOOS", "GOARCH", "CGO_ENABLED", "GOAMD64", "GOARM64", "GOARM", "GO386",
		"GOEXPERIMENT", "GOFIPS140", "GOWORK", "GOTOOLCHAIN"}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, k) {
			env = append(env, kv)
		}
	}
	return append(env, "GOFLAGS=-mod=readonly", "GOOS="+p.os, "GOARCH="+p.arch, "CGO_ENABLED=0",
		"GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=", "GOFIPS140=off", "GOWORK=off", "GOTOOLCHAIN=local")
}

// archive packs p's binary with the README and the CHANGELOG (and LICENSE once there is one).
func (b *builder) archive(p platform, bin string) error {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	files := []tarEntry{{name: binaryName, mode: 0o755, body: exe}}
	for _, doc := range []string{"README.md", "CHANGELOG.md", "LICENSE"} {
		body, err := os.ReadFile(filepath.Join(b.src.dir, doc))
		if os.IsNotExist(err) && doc == "LICENSE" {
			continue
		}
		if err != nil {
			return fmt.Errorf("packing %s: %w", doc, err)
		}
		files = append(files, tarEntry{name: doc, mode: 0o644, body: body})
	}
	var buf bytes.Buffer
	if err := writeTarGz(&buf, b.src.time, files); err != nil {
		return fmt.Errorf("packing %s: %w", b.archiveName(p), err)
	}
	return os.WriteFile(filepath.Join(b.dir, b.archiveName(p)), buf.Bytes(), 0o644)
}

// sbom writes p's CycloneDX SBOM with cyclonedx-gomod's bin mode, which reads the modules from
// the binary's build information (what `go version -m` prints) and records the binary's
// hashes. No serial number and no timestamp: both would differ on every run, and the hashes
// already name the binary.
func (b *builder) sbom(ctx context.Context, p platform, bin string) error {
	out := filepath.Join(b.work, b.sbomName(p))
	cmd := exec.CommandContext(ctx, b.cfg.sbomTool, "bin", "-json", "-output-version", "1.6", "-noserial", "-notimestamp",
		"-version", b.cfg.version, "-output", out, bin)
	cmd.Env = buildEnv(p)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("writing the SBOM of %s with %s: %w\n%s", p, b.cfg.sbomTool, err, msg)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	doc, err := withoutToolHashes(raw)
	if err != nil {
		return fmt.Errorf("reading the SBOM %s wrote: %w", b.cfg.sbomTool, err)
	}
	return os.WriteFile(filepath.Join(b.dir, b.sbomName(p)), doc, 0o644)
}

// withoutToolHashes drops the hashes cyclonedx-gomod records of its own executable
// (metadata.tools[].hashes): they belong to the machine that ran the release (the Go release,
// the platform and the paths the tool was installed with), not to the release, and would make
// two machines write different SBOMs of the same binary. The tool's name and version stay. The
// document is written back indented, keys in Go's (sorted) order, without HTML escaping (the
// package URLs carry "&").
func withoutToolHashes(raw []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if md, ok := doc["metadata"].(map[string]any); ok {
		if tools, ok := md["tools"].([]any); ok {
			for _, t := range tools {
				if tool, ok := t.(map[string]any); ok {
					delete(tool, "hashes")
				}
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sums writes SHA256SUMS over every file of the release, in the format `sha256sum -c` reads.
func (b *builder) sums() error {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, e := range entries { // ReadDir sorts by name
		if e.Name() == sumsName {
			continue
		}
		sum, err := fileSHA256(filepath.Join(b.dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "%x  %s\n", sum, e.Name())
		fmt.Fprintf(b.log, "%x  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(b.dir, sumsName), buf.Bytes(), 0o644)
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	return h.Sum(nil), nil
}
