package githubtest

import (
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Guard is how the writer of a ref move made sure it replaced the head it meant to: what tells
// a compare-and-swap from a last-writer-wins move in the RefMoves log.
type Guard string

const (
	// GuardExpected: the writer named the head it replaced, and the fake moved the ref only
	// because it was there: updateRefs with beforeOid, a push's command (its old value,
	// checked under the ref's lock), a created ref (which must not exist).
	GuardExpected Guard = "expected"
	// GuardFastForward: a non-forced move naming no head (PATCH git/refs with force false,
	// updateRefs without beforeOid or force): refused unless the old head is an ancestor of the
	// new one, so no commit is dropped, though a head moved meanwhile may be built upon.
	GuardFastForward Guard = "fast-forward"
	// GuardNone: a forced move naming no head (PATCH git/refs with force true, updateRefs with
	// force and no beforeOid, DELETE git/refs): last writer wins.
	GuardNone Guard = "none"
	// GuardServer: GitHub moved the ref itself, on top of the head it read under its own lock
	// (a commit through the Contents API, a merge, the fake's test helpers).
	GuardServer Guard = "server"
)

// RefMove is one move of a ref of the fake, in the order the fake made them: every writer
// (REST, GraphQL, git push, merges, the Contents API, the test helpers) goes through it.
type RefMove struct {
	// Time is the fake time of the move.
	Time time.Time
	// Repo is "owner/name"; Ref the full ref name (refs/heads/x).
	Repo, Ref string
	// Before and After are the ref's commit before and after ("" when absent: a created or a
	// deleted ref).
	Before, After string
	// Actor is the login the move was made as (the App's bot for an installation token).
	Actor string
	// Via is the door it came through: "rest", "graphql", "git", "contents", "merge" or
	// "setup" (a test helper).
	Via string
	// Guard is how the writer made sure it replaced what it meant to.
	Guard Guard
}

// refHow is how a ref move came: its door and its guard.
type refHow struct {
	via   string
	guard Guard
}

// recordRefMovesLocked appends changes to the ref-move log.
func (s *Server) recordRefMovesLocked(rm *repoMeta, changes []refChange, actor string) {
	now := s.clock.Now()
	for _, ch := range changes {
		s.refMoves = append(s.refMoves, RefMove{Time: now, Repo: rm.fullName(), Ref: ch.name,
			Before: hexOrEmpty(ch.before), After: hexOrEmpty(ch.after), Actor: actor, Via: ch.how.via, Guard: ch.how.guard})
	}
}

// RefMoves returns every ref move the fake made since it started (or since ResetRefMoves),
// oldest first: the record a test reads to assert that no branch was moved by a stale writer
// (a move of Guard GuardNone or GuardFastForward by fleetbot's App, or one whose Before is not
// the head the writer read).
func (s *Server) RefMoves() []RefMove {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refMoves)
}

// ResetRefMoves empties the ref-move log, e.g. after a test's setup.
func (s *Server) ResetRefMoves() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refMoves = nil
}

func hexOrEmpty(h plumbing.Hash) string {
	if h.IsZero() {
		return ""
	}
	return h.String()
}
