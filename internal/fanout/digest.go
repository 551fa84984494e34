package fanout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"slices"

	"github.com/fleetbot-io/fleetbot/internal/gittree"
)

// Digest is a fingerprint of everything a target wants of its repo: kind, name, owner, repo,
// default branch, visibility, every managed file and scaffold with its content, access and
// reviewers. Two renders of a target have the same digest exactly when Changed reports them the
// same, so a run can remember the desired state it converged every repo to as one short string
// per repo (reconcile's baseline) instead of keeping the whole render.
//
// A file enters the digest as its git blob hash, through the renderer's hash cache
// (Target.Hasher): a service digests every target of each new render, nearly all of whose
// files are byte for byte the last render's, and a cache hit costs a map lookup where hashing
// the content again was a quarter of a push's CPU.
func Digest(t *Target) string {
	d := digester{h: sha256.New(), blobs: t.hasher}
	removed := "0"
	if t.Removed {
		removed = "1"
	}
	for _, s := range []string{"fleetbot target v2", string(t.Kind), t.Name, t.Owner, t.Repo, t.DefaultBranch, t.Visibility, removed} {
		d.str(s)
	}
	d.files("files", t.Files)
	d.files("scaffolds", t.Scaffolds)
	d.str("reviewers")
	for _, r := range t.Reviewers {
		d.str(r)
	}
	// encoding/json sorts map keys: the same access always encodes the same.
	access, err := json.Marshal(t.Access)
	if err != nil {
		// Access is plain data; should it ever fail to encode, the digest must still differ
		// from any converged one, so that the repo is planned.
		access = []byte("unencodable: " + err.Error())
	}
	d.str("access")
	d.bytes(access)
	return hex.EncodeToString(d.h.Sum(nil))
}

// digester writes length-prefixed fields, so that no two different targets hash the same
// sequence of bytes.
type digester struct {
	h hash.Hash
	// blobs computes the files' blob hashes (nil: every one afresh).
	blobs *gittree.Cache
}

func (d digester) bytes(b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
}

func (d digester) str(s string) { d.bytes([]byte(s)) }

func (d digester) files(label string, m map[string][]byte) {
	d.str(label)
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		d.str(p)
		d.str(d.blobs.BlobHash(m[p]))
	}
}
