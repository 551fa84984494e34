package app

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// RecordResult is what `fleetbot rollout approve|skip|rollback` did to the control repo.
type RecordResult struct {
	// File is the record, relative to the control repo; Name the wave or cluster it is about
	// ("" for the rollback).
	File string `json:"file"`
	Name string `json:"name,omitempty"`
	// Digest is the content of the control repo the record applies to (control.Repo.Digest):
	// it lapses with the next commit that changes an input of the render.
	Digest string `json:"digest"`
	// Changed is false when the record was there already for this content; nothing was
	// written then.
	Changed bool `json:"changed"`
	// Commit is the commit recording it, "" when none was made (Changed false, not a git
	// work tree, or --no-commit); Branch is the branch it was made on.
	Commit string `json:"commit,omitempty"`
	Branch string `json:"branch,omitempty"`
}

// ApproveWave records in the control repo at dir (loaded as repo) that wave may start for the
// content repo holds: it writes rollout/approvals/<wave>.yaml with the content's digest and
// note, and commits that one file as PauseRollout does. The wave must be declared with
// approval: required. Who may approve is who may merge that file to the control repo's
// default branch: its code owners (CODEOWNERS), checked by `fleetbot check control` and by
// the branch protection's required reviews.
func ApproveWave(dir string, repo *control.Repo, wave, note string, commit bool) (RecordResult, error) {
	if !slices.Contains(approvalWaves(repo), wave) {
		return RecordResult{}, fmt.Errorf("wave %q does not require approval: the waves with approval: required are %s", wave, listOr(approvalWaves(repo), "none"))
	}
	return writeRecord(dir, repo, control.ApprovalFile(wave), wave, note, "rollout: approve wave "+wave, commit)
}

// SkipCluster records in the control repo at dir that the rollout of the content repo holds
// leaves cluster out (rollout/skips/<cluster>.yaml): no new pull request opens there, its
// wave does not wait for its health and it does not count against the failure budget.
func SkipCluster(dir string, repo *control.Repo, cluster, note string, commit bool) (RecordResult, error) {
	if repo.Cluster(cluster) == nil {
		return RecordResult{}, fmt.Errorf("cluster %q is not in clusters/ of %s: name a cluster of the control repo", cluster, dir)
	}
	return writeRecord(dir, repo, control.SkipFile(cluster), cluster, note, "rollout: skip cluster "+cluster, commit)
}

// RollBack records in the control repo at dir that the content repo holds is rolled back
// (rollout/rollback.yaml): every front end holds its rollout everywhere (no new pull request
// opens for it, open ones are still updated) until a control-repo commit changes what the
// control repo renders, such as the revert of the failed change.
func RollBack(dir string, repo *control.Repo, note string, commit bool) (RecordResult, error) {
	return writeRecord(dir, repo, control.RollbackFile, "", note, "rollout: roll back", commit)
}

// approvalWaves are the names of the declared waves that require approval, in order.
func approvalWaves(repo *control.Repo) []string {
	var out []string
	if repo == nil || repo.Platform == nil {
		return nil
	}
	add := func(waves []control.Wave) {
		for _, w := range waves {
			if w.Approval == control.ApprovalRequired && !slices.Contains(out, w.Name) {
				out = append(out, w.Name)
			}
		}
	}
	add(repo.Platform.Spec.Rollout.Waves)
	for _, c := range repo.Platform.Spec.Components {
		if c.Rollout != nil {
			add(c.Rollout.Waves)
		}
	}
	return out
}

func listOr(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	out := names[0]
	for _, n := range names[1:] {
		out += ", " + n
	}
	return out
}

// writeRecord writes the record rel (about name, with note) for repo's content and commits it
// with msg; nothing is written when the same record is there, the note is not short text,
// or the commit could not be made safely.
func writeRecord(dir string, repo *control.Repo, rel, name, note, msg string, commit bool) (RecordResult, error) {
	res := RecordResult{File: rel, Name: name, Digest: repo.Digest}
	switch {
	case repo.Digest == "":
		return res, fmt.Errorf("the control repo at %s has no content digest: load it with fleetbot validate first", dir)
	case len(note) > control.MaxRecordNote:
		return res, fmt.Errorf("--note is %d bytes, more than the %d a rollout record may have: say why in a line or two", len(note), control.MaxRecordNote)
	case !utf8.ValidString(note) || bytes.IndexByte([]byte(note), 0) >= 0:
		return res, fmt.Errorf("--note is not UTF-8 text: say why in a line of text")
	}
	rec := control.RolloutRecord{Digest: repo.Digest, Revision: repo.Revision, Note: note}
	if !control.IsRevision(rec.Revision) {
		rec.Revision = "" // a working tree, not a commit
	}
	content, err := yaml.Marshal(rec)
	if err != nil {
		return res, fmt.Errorf("writing %s: %w", rel, err)
	}
	file, err := recordFile(dir, rel)
	if err != nil {
		return res, err
	}
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, content) {
		return res, nil
	}
	c, err := workcopy.PrepareFileCommit(dir, rel, commit)
	if err != nil {
		return res, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return res, fmt.Errorf("writing %s: %w", rel, err)
	}
	if err := os.WriteFile(file, content, 0o644); err != nil {
		return res, fmt.Errorf("writing %s: %w", rel, err)
	}
	res.Changed = true
	if note != "" {
		msg += "\n\n" + note
	}
	res.Commit, res.Branch, err = c.Commit(msg, false)
	return res, err
}
