package pr

import (
	"bytes"
	"unicode/utf8"
)

// Cost is what executing a Decision writes, step by step. A forge prices a decision against
// its write budget from these counts alone (see WriteGate), never from the decision's
// internals, and translates each step into its own requests.
type Cost struct {
	// CreateRepo is 1 when the repo is created; Grants and Protections are the team grants
	// and branch protections the new repo is given once its default branch exists.
	CreateRepo, Grants, Protections int
	// Bootstrap is 1 when the default branch of a new or empty repo is created by a root
	// commit.
	Bootstrap int
	// Commits are the commits written: the bootstrap's and the bot branch's.
	Commits int
	// Files are the files those commits write or delete; Blobs are the written ones whose
	// content is binary (see Binary), which a forge carrying text inline in a tree must
	// upload one by one.
	Files, Blobs int
	// BranchMoves are branches created or moved; BranchDeletes branches deleted.
	BranchMoves, BranchDeletes int
	// PROpens, PRUpdates and PRCloses are pull-request writes; Labels is 1 when an opened
	// pull request gets labels, AutoMerge 1 when it gets auto-merge; Comments are comments
	// on pull requests.
	PROpens, PRUpdates, PRCloses, Labels, AutoMerge, Comments int
	// MergeRecords are merges done outside the forge that it records (see MergeRecorder).
	MergeRecords int
}

// Binary reports whether content is not text: not valid UTF-8, or holding a NUL byte. A
// forge whose tree write carries text inline (GitHub's Git Data API) uploads such a file as
// a blob of its own first.
func Binary(content []byte) bool {
	return !utf8.Valid(content) || bytes.ContainsRune(content, 0)
}

// Cost returns what executing d with Apply writes. It is exact for the steps the decision
// names; a forge may skip a write it finds already done (an unchanged pull request body).
func (d *Decision) Cost() Cost {
	var c Cost
	if d.CreateRepo {
		c.CreateRepo = 1
		c.Grants, c.Protections = d.grants, d.protections
	}
	commit := func(changes []Change) {
		c.Commits++
		c.BranchMoves++
		for _, ch := range changes {
			c.Files++
			if !ch.Delete && Binary(ch.Content) {
				c.Blobs++
			}
		}
	}
	if len(d.Bootstrap) > 0 {
		c.Bootstrap = 1
		commit(d.Bootstrap)
	}
	if d.RecordMerged {
		c.MergeRecords++
	}
	if d.PushBranch {
		commit(d.Changes)
	}
	switch {
	case d.OpenPR:
		c.PROpens++
		if d.labels {
			c.Labels++
		}
		if d.autoMerge {
			c.AutoMerge++
		}
	case d.UpdatePR:
		c.PRUpdates++
	}
	if d.Block {
		c.Comments++
		c.PRUpdates++ // the marker that records the block
	}
	if d.ClosePR {
		c.Comments++
		c.PRCloses++
	}
	if d.DeleteBranch {
		c.BranchDeletes++
	}
	return c
}
