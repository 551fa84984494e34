package github

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPrepareCacheDirCreatesPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "cache")
	require.NoError(t, PrepareCacheDir(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// TestAttackSharedCacheDirRefused: a cache directory another user can write to (or a symlink
// someone planted) is refused with what to do, before anything is read from it.
func TestAttackSharedCacheDirRefused(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cache")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chmod(dir, 0o777))
	err := PrepareCacheDir(dir)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrUnsafeCache))
	assert.Contains(t, err.Error(), "writable by other users")
	assert.Contains(t, err.Error(), "chmod go-w")

	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(t.TempDir(), link))
	err = PrepareCacheDir(link)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a symlink")
}

// TestAttackPlantedCacheFileIgnored: a snapshot file others can write is not trusted: the
// repo is read from GitHub instead.
func TestAttackPlantedCacheFileIgnored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	f := &Forge{opts: ForgeOptions{CacheDir: dir}, log: slog.New(slog.DiscardHandler)}
	name := f.cacheFile("acme", "cluster-a")
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o700))
	require.NoError(t, os.WriteFile(name, []byte(`{"version":1,"defaultBranch":"main","botBranch":"fleetbot/sync","prRead":true}`), 0o600))
	assert.NotNil(t, f.loadState("acme", "cluster-a"), "the user's own file is read")
	require.NoError(t, os.Chmod(name, 0o666))
	assert.Nil(t, f.loadState("acme", "cluster-a"), "a world-writable file is not trusted")
}

// TestAttackForeignCacheDirRefused: a cache directory or snapshot file that belongs to another
// user (who could rewrite what fleetbot believes a repo holds) is refused, even when nobody
// else can write to it.
func TestAttackForeignCacheDirRefused(t *testing.T) {
	t.Parallel()
	foreign := "/" // not ours unless we are root
	if os.Getuid() == 0 {
		foreign = filepath.Join(t.TempDir(), "cache")
		require.NoError(t, os.Mkdir(foreign, 0o700))
		require.NoError(t, os.Chown(foreign, 65534, 65534))
	}
	err := PrepareCacheDir(foreign)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrUnsafeCache))
	assert.Contains(t, err.Error(), "not to you")

	if os.Getuid() != 0 {
		return // only root can give a file away
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o700))
	f := &Forge{opts: ForgeOptions{CacheDir: dir}, log: slog.New(slog.DiscardHandler)}
	name := f.cacheFile("acme", "cluster-a")
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o700))
	require.NoError(t, os.WriteFile(name, []byte(`{"version":1,"defaultBranch":"main","botBranch":"fleetbot/sync","prRead":true}`), 0o600))
	require.NotNil(t, f.loadState("acme", "cluster-a"), "the user's own file is read")
	require.NoError(t, os.Chown(name, 65534, 65534))
	assert.Nil(t, f.loadState("acme", "cluster-a"), "another user's file is not trusted")
}
