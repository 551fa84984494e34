package github

import "github.com/fleetbot-io/fleetbot/internal/pr"

// blobWrites counts the files of changes that need a blob of their own before the tree: a
// tree carries text inline, but a binary file must be uploaded first (POST git/blobs), which
// GitHub counts as content creation like the tree, the commit and the ref.
func blobWrites(changes []pr.Change) int {
	n := 0
	for _, c := range changes {
		if !c.Delete && !isText(c.Content) {
			n++
		}
	}
	return n
}
