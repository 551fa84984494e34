// Package gitloose writes git objects as loose object files, as git and go-git store them,
// reusing one zlib compressor for every object a Writer writes.
//
// go-git's filesystem storage takes a compressor from a sync.Pool for each object it writes;
// under the race detector that pool keeps almost nothing, so every blob, tree and commit
// allocated and faulted in a fresh ~650 KB deflate state: about a fifth of the CPU of the
// test packages that write objects by the thousand (the fake GitHub, the local forge).
package gitloose

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// Writer writes loose objects. It is not safe for concurrent use: give each goroutine (or
// each lock holder) its own.
type Writer struct {
	zw  *zlib.Writer
	buf bytes.Buffer
}

// NewWriter returns a Writer with its compressor. Objects are compressed at zlib's best
// speed; git reads any level.
func NewWriter() *Writer {
	w, _ := NewWriterLevel(zlib.BestSpeed) // cannot fail: the level is valid
	return w
}

// NewWriterLevel returns a Writer compressing at a zlib level: zlib.NoCompression stores
// objects as they are (still valid zlib streams, which git reads), for scratch repositories
// where CPU matters more than disk.
func NewWriterLevel(level int) (*Writer, error) {
	zw, err := zlib.NewWriterLevel(nil, level)
	if err != nil {
		return nil, fmt.Errorf("git object writer: %w", err)
	}
	return &Writer{zw: zw}, nil
}

// Write stores an object of type t with content data in the objects directory of a git
// repository (objectsDir is <git-dir>/objects) and returns its hash. An object already
// present is left as it is. The file appears complete or not at all (written to a temporary
// file, then renamed), read-only as git leaves it.
func (w *Writer) Write(objectsDir string, t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, data)
	hex := h.String()
	dir := filepath.Join(objectsDir, hex[:2])
	file := filepath.Join(dir, hex[2:])
	if _, err := os.Lstat(file); err == nil {
		return h, nil
	}
	w.buf.Reset()
	w.zw.Reset(&w.buf)
	if _, err := fmt.Fprintf(w.zw, "%s %d\x00", t, len(data)); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("compressing %s %s: %w", t, h, err)
	}
	if _, err := w.zw.Write(data); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("compressing %s %s: %w", t, h, err)
	}
	if err := w.zw.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("compressing %s %s: %w", t, h, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return plumbing.ZeroHash, fmt.Errorf("writing %s %s: %w", t, h, err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("writing %s %s: %w", t, h, err)
	}
	_, err = tmp.Write(w.buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return plumbing.ZeroHash, fmt.Errorf("writing %s %s in %s: %w", t, h, objectsDir, err)
	}
	return h, nil
}

// WriteObject stores an encoded object (a go-git tree or commit encoded into a
// plumbing.MemoryObject, say) like Write.
func (w *Writer) WriteObject(objectsDir string, o plumbing.EncodedObject) (plumbing.Hash, error) {
	r, err := o.Reader()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading %s to store it: %w", o.Type(), err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("reading %s to store it: %w", o.Type(), err)
	}
	return w.Write(objectsDir, o.Type(), data)
}

// Pool keeps Writers for reuse by concurrent callers: sync.Pool would drop them at every
// garbage collection (and, under the race detector, at random), which is the cost a Writer
// exists to avoid.
type Pool struct{ free chan *Writer }

// NewPool returns a Pool keeping up to n idle Writers.
func NewPool(n int) *Pool { return &Pool{free: make(chan *Writer, n)} }

// Get returns an idle Writer, or a new one.
func (p *Pool) Get() *Writer {
	select {
	case w := <-p.free:
		return w
	default:
		return NewWriter()
	}
}

// Put returns a Writer for reuse; it is dropped when the pool is full.
func (p *Pool) Put(w *Writer) {
	select {
	case p.free <- w:
	default:
	}
}
