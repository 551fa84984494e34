package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image, as the Dockerfile builds it too (TestDockerfileMatchesTheReleaseImage): the user
// distroless calls nonroot, the binary at the root, serve by default on port 8080.
const (
	imageUser       = "65532:65532"
	imageUID        = 65532
	imageEntrypoint = "/fleetbot"
	imageCmd        = "serve"
	imagePort       = "8080/tcp"
	imageHome       = "/home/nonroot"
	imageCerts      = "/etc/ssl/certs/ca-certificates.crt"
	// rootfsDir holds the image's files besides the binary: /etc/passwd, /etc/group,
	// /etc/nsswitch.conf and Debian's CA certificates (scripts/ca-certificates.sh).
	rootfsDir = "deploy/image/rootfs"
	// refName names the image in the OCI layout's index.json (skopeo's oci-archive:FILE:REF).
	refName = "org.opencontainers.image.ref.name"
)

// labels are the image's OCI labels (and the annotations of its manifests and index): what it
// is, which version and commit, where the source is, under which licence, and when the commit
// was made (not when the image was built, so that two builds are the same bytes).
func (b *builder) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "fleetbot",
		"org.opencontainers.image.description": "fleetbot serve: the GitHub App webhook service of fleetbot",
		"org.opencontainers.image.version":     b.cfg.version,
		"org.opencontainers.image.revision":    b.src.commit,
		"org.opencontainers.image.source":      b.cfg.source,
		"org.opencontainers.image.url":         b.cfg.source,
		"org.opencontainers.image.licenses":    b.cfg.licenses,
		"org.opencontainers.image.created":     b.src.time.Format(time.RFC3339),
	}
}

// image writes the OCI image layout of the linux binaries, one image per platform under one
// index, as a tar: FROM scratch, a base layer (the same bytes on every platform) and the binary.
func (b *builder) image(platforms []platform, binaries map[platform]string) error {
	baseLayer, err := b.baseLayer()
	if err != nil {
		return err
	}
	created := v1.Time{Time: b.src.time}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := b.platformImage(p, binaries[p], baseLayer, created)
		if err != nil {
			return fmt.Errorf("building the image for %s: %w", p, err)
		}
		plat := &v1.Platform{OS: p.os, Architecture: p.arch}
		if p.arch == "arm64" {
			plat.Variant = "v8"
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: noArtifactType{img}, Descriptor: v1.Descriptor{Platform: plat}})
	}
	idx = mutate.Annotations(idx, b.labels()).(v1.ImageIndex)

	dir := filepath.Join(b.work, "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: b.cfg.version})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	entries, err := dirEntries(dir)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, b.src.time, entries); err != nil {
		return fmt.Errorf("packing the OCI layout: %w", err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, b.imageName()), buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "built image %s (%d platforms)\n", b.imageName(), len(platforms))
	return nil
}

// platformImage is the image of one platform: its config names the non-root user, the
// entrypoint and the labels, and dates everything at the commit.
func (b *builder) platformImage(p platform, bin string, baseLayer v1.Layer, created v1.Time) (v1.Image, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	appLayer, err := gzLayer(b.src.time, []tarEntry{{name: imageEntrypoint[1:], mode: 0o755, body: exe}})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "fleetbot release: " + rootfsDir + " (passwd, group, nsswitch.conf, Debian's CA certificates), " + imageHome + ", /tmp",
		}},
		mutate.Addendum{Layer: appLayer, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "fleetbot release: " + imageEntrypoint + " (" + p.String() + ", " + b.cfg.version + ")",
		}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = p.os, p.arch, created
	if p.arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Config = v1.Config{
		User:         imageUser,
		Entrypoint:   []string{imageEntrypoint},
		Cmd:          []string{imageCmd},
		ExposedPorts: map[string]struct{}{imagePort: {}},
		Env:          []string{"SSL_CERT_FILE=" + imageCerts},
		WorkingDir:   imageHome,
		Labels:       b.labels(),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, b.labels()).(v1.Image), nil
}

// baseLayer holds the files of deploy/image/rootfs (root's, read-only to others), the home of
// the non-root user (its own) and /tmp.
func (b *builder) baseLayer() (v1.Layer, error) {
	root := filepath.Join(b.src.dir, rootfsDir)
	files, err := dirEntries(root)
	if err != nil {
		return nil, fmt.Errorf("reading the image's files: %w", err)
	}
	files = append(files,
		tarEntry{name: "home/", mode: 0o755},
		tarEntry{name: imageHome[1:] + "/", mode: 0o700, uid: imageUID, gid: imageUID},
		tarEntry{name: "tmp/", mode: 0o1777},
	)
	return gzLayer(b.src.time, files)
}

// gzLayer is a gzip-compressed layer of entries; go-containerregistry takes the compressed
// bytes as they are (its own compression is not needed, and ours is fixed by Go's release).
func gzLayer(mtime time.Time, entries []tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeTarGz(&buf, mtime, entries); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// dirEntries reads the tree under dir as tar entries (directories end in "/" and have no
// body), files 0644 and directories 0755. Only regular files and directories are taken.
func dirEntries(dir string) ([]tarEntry, error) {
	var out []tarEntry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			out = append(out, tarEntry{name: rel + "/", mode: 0o755})
		case d.Type().IsRegular():
			body, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out = append(out, tarEntry{name: rel, mode: 0o644, body: body})
		default:
			return fmt.Errorf("%s is neither a file nor a directory", path)
		}
		return nil
	})
	return out, err
}

// noArtifactType is an image whose descriptor in an index has no artifactType. The OCI image
// spec 1.1 makes it optional, and go-containerregistry sets it to the config's media type; tools
// that predate 1.1 (Debian 12's skopeo 1.9) drop it when they copy the index, and with it the
// index's digest, so a pushed image would not have the digest of the release.
type noArtifactType struct{ v1.Image }

// ArtifactType is empty: see noArtifactType.
func (noArtifactType) ArtifactType() (string, error) { return "", nil }
