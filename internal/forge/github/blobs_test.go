package github

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestContentWritesCountsBlobs: the budget's estimate of a decision counts the blob every
// binary file needs before its tree, in the bootstrap commit and in the bot commit alike.
func TestContentWritesCountsBlobs(t *testing.T) {
	text := pr.Change{Path: "README.md", Content: []byte("# hello\n")}
	binary := pr.Change{Path: "logo.png", Content: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}
	gone := pr.Change{Path: "old.bin", Delete: true}
	d := &pr.Decision{PushBranch: true, Changes: []pr.Change{text, binary, gone}}
	assert.Equal(t, 4, ContentWrites(d), "tree, commit, ref and one blob")
	d = &pr.Decision{CreateRepo: true, Bootstrap: []pr.Change{text, binary, binary}, PushBranch: true, Changes: []pr.Change{text}, OpenPR: true}
	assert.Equal(t, 1+4+2+3+1, ContentWrites(d), "repo, bootstrap (contents, tree, commit, ref) and two blobs, bot commit, PR")
}
