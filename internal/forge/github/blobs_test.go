package github

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestRequestsCountBlobs: the price of a decision counts the blob every binary file needs
// before its tree, in the bootstrap commit and in the bot commit alike.
func TestRequestsCountBlobs(t *testing.T) {
	t.Parallel()
	text := pr.Change{Path: "README.md", Content: []byte("# hello\n")}
	binary := pr.Change{Path: "logo.png", Content: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}
	gone := pr.Change{Path: "old.bin", Delete: true}
	d := &pr.Decision{PushBranch: true, Changes: []pr.Change{text, binary, gone}}
	_, content := Requests(d.Cost())
	assert.Equal(t, 4, content, "tree, commit, ref and one blob")
	d = &pr.Decision{CreateRepo: true, Bootstrap: []pr.Change{text, binary, binary}, PushBranch: true, Changes: []pr.Change{text}, OpenPR: true}
	_, content = Requests(d.Cost())
	assert.Equal(t, 1+4+2+3+1, content, "repo, bootstrap (contents, tree, commit, ref) and two blobs, bot commit, PR")
}
