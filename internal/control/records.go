package control

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Rollout records: files fleetbot's rollout commands write in the control repo, one per wave or
// cluster, reviewed and merged like any control-repo change.
const (
	// ApprovalsDir holds one file per approved wave, <wave>.yaml (`fleetbot rollout approve
	// WAVE`): the wave, when approval: required, may start for the content it names.
	ApprovalsDir = "rollout/approvals"
	// SkipsDir holds one file per skipped cluster, <cluster>.yaml (`fleetbot rollout skip
	// CLUSTER`): the rollout of the content it names leaves the cluster out.
	SkipsDir = "rollout/skips"
	// RollbackFile marks the content it names as rolled back (`fleetbot rollout rollback`):
	// no new pull request opens for it anywhere until a control-repo commit changes what the
	// control repo renders.
	RollbackFile = "rollout/rollback.yaml"
	// MaxRecordBytes bounds one record: a digest, a revision and a short note.
	MaxRecordBytes = 4096
)

// RolloutRecord is an approval or a skip. It is bound to the control repo's content by its
// digest (Repo.Digest): it applies while the control repo renders what it rendered when the
// record was written, and lapses with the next change to an input of the render. Commits
// that only pause, approve or skip change no input, so a record outlives them.
type RolloutRecord struct {
	// Name is the wave (an approval) or the cluster (a skip): the file's name.
	Name string `yaml:"-" json:"name"`
	// Digest is the Repo.Digest of the content the record is about ("sha256:<hex>").
	Digest string `yaml:"digest" json:"digest"`
	// Revision is the control-repo commit it was written at, for the people reviewing it.
	Revision string `yaml:"revision,omitempty" json:"revision,omitempty"`
	// Note says why (at most MaxRecordNote bytes).
	Note   string `yaml:"note,omitempty" json:"note,omitempty"`
	Source Source `yaml:"-" json:"-"`
}

// MaxRecordNote bounds a record's note.
const MaxRecordNote = 1024

var (
	digestRe   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	revisionRe = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
)

// IsRevision reports whether s names a control-repo commit as a record's revision may: its
// hex SHA (7 to 64 digits).
func IsRevision(s string) bool { return revisionRe.MatchString(s) }

// Current reports whether the record is about the content r holds.
func (rec RolloutRecord) Current(r *Repo) bool {
	return r != nil && r.Digest != "" && rec.Digest == r.Digest
}

// ApprovedWaves returns the names of the waves approved for the content r holds.
func (r *Repo) ApprovedWaves() map[string]bool {
	return currentNames(r, r.Approvals)
}

// SkippedClusters returns the clusters the rollout of the content r holds leaves out.
func (r *Repo) SkippedClusters() map[string]bool {
	return currentNames(r, r.Skips)
}

// RolledBack returns the rollback record when it is about the content r holds, else nil.
func (r *Repo) RolledBack() *RolloutRecord {
	if r == nil || r.Rollback == nil || !r.Rollback.Current(r) {
		return nil
	}
	return r.Rollback
}

func currentNames(r *Repo, recs []RolloutRecord) map[string]bool {
	out := map[string]bool{}
	for _, rec := range recs {
		if rec.Current(r) {
			out[rec.Name] = true
		}
	}
	return out
}

// inputs collects the digest of every input of the render the loader reads.
type inputs struct {
	files []string // "name\x00<sha256 hex>"
}

// add records one input file by its name in the repo and its content.
func (in *inputs) add(name string, data []byte) {
	sum := sha256.Sum256(data)
	in.files = append(in.files, name+"\x00"+hex.EncodeToString(sum[:]))
}

// digest is the digest of every input, by name and content, in name order.
func (in *inputs) digest() string {
	sort.Strings(in.files)
	h := sha256.New()
	for _, f := range in.files {
		h.Write([]byte(f))
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// loadRecords reads the rollout records: rollout/approvals/<wave>.yaml,
// rollout/skips/<cluster>.yaml and rollout/rollback.yaml.
func (l *loader) loadRecords(top map[string]fs.DirEntry) error {
	dir, ok := top[path.Dir(ApprovalsDir)]
	if !ok || !dir.IsDir() {
		return nil
	}
	var err error
	if l.repo.Approvals, err = l.records(ApprovalsDir, "wave"); err != nil {
		return err
	}
	if l.repo.Skips, err = l.records(SkipsDir, "cluster"); err != nil {
		return err
	}
	entries, err := fs.ReadDir(l.fsys, path.Dir(RollbackFile))
	if err != nil {
		return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, path.Dir(RollbackFile), err)
	}
	for _, e := range entries {
		if e.Name() != path.Base(RollbackFile) || e.IsDir() {
			continue
		}
		rec, ok, err := l.record(RollbackFile, e, "rollback")
		if err != nil {
			return err
		}
		if ok {
			l.repo.Rollback = &rec
		}
	}
	return nil
}

// records reads the records of dir, each named after its wave or cluster (what).
func (l *loader) records(dir, what string) ([]RolloutRecord, error) {
	entries, err := fs.ReadDir(l.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: listing %s: %w", ErrUnreadable, dir, err)
	}
	var out []RolloutRecord
	for _, e := range entries {
		name := dir + "/" + e.Name()
		if e.IsDir() {
			l.is.Add(Position{File: name}, fmt.Sprintf("move its files directly into %s/ (nested directories are not read)", dir), "%s is not read", name)
			continue
		}
		if !isYAML(name) {
			continue // README.md and friends
		}
		rec, ok, err := l.record(name, e, what)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// record reads one record file.
func (l *loader) record(name string, e fs.DirEntry, what string) (RolloutRecord, bool, error) {
	from, ok := l.source(name, e)
	if !ok {
		return RolloutRecord{}, false, nil
	}
	base := strings.TrimSuffix(strings.TrimSuffix(path.Base(name), ".yaml"), ".yml")
	if errs := validation.IsDNS1123Label(base); len(errs) > 0 {
		l.is.Add(Position{File: name}, fmt.Sprintf("name the file <%s>.yaml after the %s it is about", what, what),
			"%q is not a %s name: %s", base, what, strings.Join(errs, "; "))
		return RolloutRecord{}, false, nil
	}
	if info, err := fs.Stat(l.fsys, from); err == nil && info.Size() > MaxRecordBytes {
		l.is.Add(Position{File: name}, "a record holds a digest, a revision and a short note", "%d bytes, more than the %d a rollout record may have", info.Size(), MaxRecordBytes)
		return RolloutRecord{}, false, nil
	}
	data, err := l.readFile(from)
	if err != nil {
		return RolloutRecord{}, false, err
	}
	d := parseDocument(name, data, &l.is)
	if d == nil {
		return RolloutRecord{}, false, nil
	}
	var rec RolloutRecord
	if !d.decode(&rec, &l.is) {
		return RolloutRecord{}, false, nil
	}
	rec.Name, rec.Source = base, d.src
	hint := fmt.Sprintf("write it with fleetbot rollout %s, which takes the digest from the control repo", map[string]string{"wave": "approve", "cluster": "skip", "rollback": "rollback"}[what])
	switch {
	case rec.Digest == "":
		l.is.Add(d.src.At("digest"), hint, "the record names no digest: it would apply to no content")
	case !digestRe.MatchString(rec.Digest):
		l.is.Add(d.src.At("digest"), hint, "invalid digest %q: want sha256: and 64 lowercase hex digits", rec.Digest)
	}
	if rec.Revision != "" && !revisionRe.MatchString(rec.Revision) {
		l.is.Add(d.src.At("revision"), "name the control-repo commit by its hex SHA, or leave revision out", "invalid revision %q", rec.Revision)
	}
	if len(rec.Note) > MaxRecordNote {
		l.is.Add(d.src.At("note"), "say why in a line or two", "the note has %d bytes, more than %d", len(rec.Note), MaxRecordNote)
	}
	return rec, true, nil
}

// loadCodeowners reads the control repo's CODEOWNERS, the first of CodeownersPaths that
// exists, as GitHub does. Only a regular file is read (a link is not followed), and one over
// GitHub's size limit is not loaded, by GitHub either.
func (l *loader) loadCodeowners(top map[string]fs.DirEntry) error {
	for _, p := range CodeownersPaths {
		dir, base := path.Split(p)
		var e fs.DirEntry
		if dir == "" {
			e = top[base]
		} else if d, ok := top[strings.TrimSuffix(dir, "/")]; ok && d.IsDir() {
			entries, err := fs.ReadDir(l.fsys, strings.TrimSuffix(dir, "/"))
			if err != nil {
				return fmt.Errorf("%w: listing %s: %w", ErrUnreadable, dir, err)
			}
			for _, x := range entries {
				if x.Name() == base {
					e = x
				}
			}
		}
		if e == nil || !e.Type().IsRegular() {
			continue
		}
		b, err := readAtMost(l.fsys, p, MaxCodeownersBytes)
		if errors.Is(err, ErrTooLarge) {
			return nil
		}
		if err != nil {
			return err
		}
		l.repo.Codeowners = ParseCodeowners(p, b)
		return nil
	}
	return nil
}
