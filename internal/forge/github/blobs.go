package github

import "github.com/fleetbot-io/fleetbot/internal/pr"

// isText reports whether a file's content can travel inline in a tree (a JSON string); the
// rest is uploaded as a blob first, which pr.Cost counts as Blobs by the same rule.
func isText(b []byte) bool { return !pr.Binary(b) }
