package app

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"unicode/utf8"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// PauseResult is what `fleetbot rollout pause|resume` did to the control repo.
type PauseResult struct {
	// File is the pause file, relative to the control repo (control.PausedFile).
	File string
	// Changed is false when there was nothing to do (already paused with that reason, or not
	// paused); nothing was written then.
	Changed bool
	// Commit is the commit recording the change, "" when none was made (Changed false, not a
	// git work tree, or no commit asked for); Branch is the branch it was made on.
	Commit, Branch string
}

// PauseRollout records in the control repo at dir that every rollout is paused: it writes
// control.PausedFile with reason and, when commit is true and dir is in a git work tree,
// commits that one file. Paused, no new rollout wave starts, no new pull request opens in a
// cluster repo and fleetbot enables no auto-merge; open pull requests are still updated in
// place. It takes effect in every front end once the commit reaches the control repo's
// default branch. Nothing is written when reason is not text or too long, dir is not a
// control repo, or the commit could not be made safely (other staged changes, no author).
func PauseRollout(dir, reason string, commit bool) (PauseResult, error) {
	res := PauseResult{File: control.PausedFile}
	content := []byte(reason)
	if len(reason) > 0 {
		content = append(content, '\n')
	}
	switch {
	case len(content) > control.MaxPauseBytes:
		return res, fmt.Errorf("--reason is %d bytes, more than the %d %s may have: say why in a line", len(content), control.MaxPauseBytes, control.PausedFile)
	case !utf8.Valid(content) || bytes.IndexByte(content, 0) >= 0:
		return res, fmt.Errorf("--reason is not UTF-8 text: say why the rollout is paused in a line of text")
	}
	file, err := recordFile(dir, control.PausedFile)
	if err != nil {
		return res, err
	}
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, content) {
		return res, nil // already paused, for that reason
	}
	c, err := workcopy.PrepareFileCommit(dir, control.PausedFile, commit)
	if err != nil {
		return res, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return res, fmt.Errorf("pausing the rollout: %w", err)
	}
	if err := os.WriteFile(file, content, 0o644); err != nil {
		return res, fmt.Errorf("pausing the rollout: %w", err)
	}
	res.Changed = true
	msg := "rollout: pause"
	if reason != "" {
		msg += "\n\n" + reason
	}
	res.Commit, res.Branch, err = c.Commit(msg, false)
	return res, err
}

// ResumeRollout removes control.PausedFile from the control repo at dir (and commits the
// removal as PauseRollout commits the pause): the rollout continues where it stopped, from
// what the forge shows.
func ResumeRollout(dir string, commit bool) (PauseResult, error) {
	res := PauseResult{File: control.PausedFile}
	file, err := recordFile(dir, control.PausedFile)
	if err != nil {
		return res, err
	}
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return res, nil // not paused
	}
	c, err := workcopy.PrepareFileCommit(dir, control.PausedFile, commit)
	if err != nil {
		return res, err
	}
	if !c.Commits() {
		if err := os.Remove(file); err != nil {
			return res, fmt.Errorf("resuming the rollout: %w", err)
		}
	}
	res.Changed = true
	res.Commit, res.Branch, err = c.Commit("rollout: resume", true)
	if err == nil {
		_ = os.Remove(filepath.Dir(file)) // the rollout directory, when nothing else is in it
	}
	return res, err
}

// recordFile is the rollout record rel (the pause file, an approval, a skip, the rollback)
// of the control repo at dir, which must hold platform.yaml (a record written anywhere else
// would record nothing); the directories on its way must be directories, the file a regular
// file if it exists.
func recordFile(dir, rel string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "platform.yaml")); err != nil {
		return "", fmt.Errorf("--control %s is not a control repo (no platform.yaml): %w", dir, err)
	}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if info, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(d))); err == nil && !info.IsDir() {
			return "", fmt.Errorf("%s: %s is not a directory: move it away to record %s there", dir, d, rel)
		}
	}
	if info, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil && !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: %s is not a regular file: remove it", dir, rel)
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}
