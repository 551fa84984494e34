// Package local is the embedded forge: target repo owner/repo is the bare git
// repo PATH/owner/repo.git, its pull requests are the JSON array
// PATH/owner/repo.pulls.json and its access settings are
// PATH/owner/repo.settings.json. It needs no network and no GitHub, and
// plain git can read (and merge) everything it writes.
//
// One process at a time may write under PATH: Open takes an exclusive
// advisory lock on PATH/.fleetbot.lock, waiting up to Options.LockTimeout.
package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/gitloose"
)

// Default settings of Options.
const (
	DefaultLockTimeout = 30 * time.Second
	// LockFile is the lock file name under PATH.
	LockFile = ".fleetbot.lock"
	// CommitterName and CommitterEmail are the identity of every commit the
	// local forge writes for fleetbot.
	CommitterName  = "fleetbot"
	CommitterEmail = "fleetbot@users.noreply.local"
	// ManagedBy is the settings.json marker of repos fleetbot manages.
	ManagedBy = "fleetbot"
)

// ErrLocked is returned by Open when another process holds the lock past
// the timeout.
var ErrLocked = errors.New("local forge is locked")

// Options tune the local forge.
type Options struct {
	// LockTimeout is how long Open waits for the lock (default 30s; a
	// negative value fails at once).
	LockTimeout time.Duration
	// Shared takes a shared lock instead of an exclusive one: for read-only
	// users such as plan, which may run beside each other but not beside an
	// apply.
	Shared bool
	// Now stamps commits and pull request events (default time.Now); tests
	// inject a fixed clock so commit hashes are deterministic.
	Now func() time.Time
	// Logger receives debug logs (default: discarded).
	Logger *slog.Logger
}

// Forge is the local forge rooted at one directory. Its methods are safe for
// concurrent use; operations on one repo are serialised.
type Forge struct {
	root string
	opts Options
	log  *slog.Logger
	lock *os.File

	mu    sync.Mutex
	repos map[string]*sync.Mutex
	// orgMu serialises the writes of an owner's org ruleset (OrgRulesetFile).
	orgMu sync.Mutex
	// writers write new git objects: each keeps its zlib compressor from commit to commit.
	writers *gitloose.Pool
}

// looseWriters is how many object writers (each with a zlib compressor of ~1 MB) the forge
// keeps between commits: as many as repos are committed to at once in a typical apply.
const looseWriters = 4

// Open opens (creating it if needed) the local forge rooted at path and
// takes its lock. Close releases it.
func Open(path string, opts Options) (*Forge, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	root, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("local forge %s: %w", path, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("local forge: creating %s: %w", root, err)
	}
	lf, err := lock(root, opts)
	if err != nil {
		return nil, err
	}
	return &Forge{root: root, opts: opts, log: opts.Logger.With("forge", "local:"+root), lock: lf, repos: map[string]*sync.Mutex{},
		writers: gitloose.NewPool(looseWriters)}, nil
}

// Root is the absolute directory of the forge.
func (f *Forge) Root() string { return f.root }

// Close releases the lock. The Forge must not be used afterwards.
func (f *Forge) Close() error {
	if f.lock == nil {
		return nil
	}
	lf := f.lock
	f.lock = nil
	var err error
	if !f.opts.Shared {
		err = lf.Truncate(0) // the holder line would mislead once released
	}
	if err = errors.Join(err, unlockClose(lf)); err != nil {
		return fmt.Errorf("local forge %s: releasing lock: %w", f.root, err)
	}
	return nil
}

func lock(root string, opts Options) (*os.File, error) {
	name := filepath.Join(root, LockFile)
	lf, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local forge: opening lock %s: %w", name, err)
	}
	how := syscall.LOCK_EX
	if opts.Shared {
		how = syscall.LOCK_SH
	}
	deadline := time.Now().Add(opts.LockTimeout)
	for waiting := false; ; {
		err = syscall.Flock(int(lf.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, errors.Join(fmt.Errorf("local forge: locking %s: %w", name, err), lf.Close())
		}
		if !waiting && opts.LockTimeout > 0 {
			waiting = true
			opts.Logger.Info("waiting for the local forge's lock", "forge", "local:"+root, "holder", strings.TrimSpace(readHolder(lf)), "timeout", opts.LockTimeout)
		}
		if time.Now().After(deadline) {
			holder := readHolder(lf)
			return nil, errors.Join(fmt.Errorf("%w: another fleetbot apply holds the lock on %s%s; wait for it to finish (waited %s)",
				ErrLocked, root, holder, opts.LockTimeout), lf.Close())
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !opts.Shared {
		line := fmt.Sprintf("pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
		err := lf.Truncate(0)
		if err == nil {
			_, err = lf.WriteAt([]byte(line), 0)
		}
		if err != nil {
			// Releasing is part of failing cleanly: if it fails too, both errors are reported.
			return nil, errors.Join(fmt.Errorf("local forge: writing lock %s: %w", name, err), unlockClose(lf))
		}
	}
	return lf, nil
}

// unlockClose releases the lock on lf and closes it; either failure is returned.
func unlockClose(lf *os.File) error {
	return errors.Join(syscall.Flock(int(lf.Fd()), syscall.LOCK_UN), lf.Close())
}

var holderRE = regexp.MustCompile(`^pid (\d+) since (\S+)`)

func readHolder(lf *os.File) string {
	b, err := io.ReadAll(io.NewSectionReader(lf, 0, 256))
	if err != nil {
		return ""
	}
	m := holderRE.FindStringSubmatch(string(b))
	if m == nil {
		return ""
	}
	pid, _ := strconv.Atoi(m[1])
	return fmt.Sprintf(" since %s (pid %d)", m[2], pid)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validName(kind, s string) error {
	if !nameRE.MatchString(s) || s == "." || s == ".." || strings.HasSuffix(s, ".git") {
		return fmt.Errorf("invalid %s name %q", kind, s)
	}
	return nil
}

// paths of one repo's files.
type repoPaths struct {
	full     string // owner/repo
	git      string
	pulls    string
	settings string
	statuses string
}

func (f *Forge) paths(owner, repo string) (repoPaths, error) {
	if err := validName("owner", owner); err != nil {
		return repoPaths{}, err
	}
	if err := validName("repo", repo); err != nil {
		return repoPaths{}, err
	}
	base := filepath.Join(f.root, owner, repo)
	return repoPaths{
		full: owner + "/" + repo, git: base + ".git",
		pulls: base + ".pulls.json", settings: base + ".settings.json", statuses: base + ".statuses.json",
	}, nil
}

// lockRepo serialises operations on one repo within this process (the file
// lock already excludes other processes).
func (f *Forge) lockRepo(owner, repo string) func() {
	key := owner + "/" + repo
	f.mu.Lock()
	m, ok := f.repos[key]
	if !ok {
		m = &sync.Mutex{}
		f.repos[key] = m
	}
	f.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// writeAtomic writes data to name through a temp file and a rename, so a
// reader never sees half a file and a crash never loses the old one.
func writeAtomic(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// encodeJSON is indented, deterministic (sorted map keys) JSON that keeps
// markdown and HTML comments readable, ending with a newline.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
