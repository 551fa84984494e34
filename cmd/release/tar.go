package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// tarEntry is one file or directory of a reproducible tar.
type tarEntry struct {
	// name is the path inside the archive; a directory's ends in "/".
	name string
	mode int64
	// uid and gid own the entry; 0 (root) unless set.
	uid, gid int
	body     []byte
}

// writeTar writes entries sorted by name, every one with mtime, its own mode and owner and no
// user or group name: nothing of the machine, the clock or the order they were gathered in.
func writeTar(w io.Writer, mtime time.Time, entries []tarEntry) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b tarEntry) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime,
			Typeflag: tar.TypeReg, Size: int64(len(e.body)), Format: tar.FormatUSTAR,
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
	}
	return tw.Close()
}

// writeTarGz is writeTar through gzip with an empty header (no name, no time).
func writeTarGz(w io.Writer, mtime time.Time, entries []tarEntry) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := writeTar(zw, mtime, entries); err != nil {
		return err
	}
	return zw.Close()
}
