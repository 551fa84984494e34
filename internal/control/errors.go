package control

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// ErrUnreadable marks a control repo that could not be read at all (missing
// directory, I/O error). It is never treated as "the repo is empty": callers
// must not plan removals from it.
var ErrUnreadable = errors.New("control repo unreadable")

// Position is a place in the control repo.
type Position struct {
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
}

// String renders "file:line", or just the file when the line is unknown.
func (p Position) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

// Issue is one validation problem: where, what, and how to fix it.
type Issue struct {
	Pos     Position `json:"position"`
	Message string   `json:"message"`
	Hint    string   `json:"hint,omitempty"`
}

// String renders "file:line: message (hint: ...)".
func (i Issue) String() string {
	s := i.Pos.String() + ": " + i.Message
	if i.Hint != "" {
		s += "\n    hint: " + i.Hint
	}
	return s
}

// Issues is every validation problem of a control repo. It is an error so
// callers can return it directly; errors.As recovers the list. It carries its
// class (report.Classifier): a front end decides by report.ClassOf, and reads
// the list only to show where the problems are.
type Issues []Issue

// Outcome implements report.Classifier: a control repo with problems is invalid
// input (report.ClassInvalidInput, reason InvalidControlRepo): the same commit
// fails the same way until someone fixes it.
func (is Issues) Outcome() report.Outcome {
	return report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonInvalidControlRepo}
}

// Error lists every issue, one per line.
func (is Issues) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s) in the control repo:", len(is))
	for _, i := range is {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(i.String(), "\n", "\n  "))
	}
	return b.String()
}

// Sort orders issues by file, line and message so output is deterministic.
func (is Issues) Sort() {
	sort.SliceStable(is, func(a, b int) bool {
		if is[a].Pos.File != is[b].Pos.File {
			return is[a].Pos.File < is[b].Pos.File
		}
		if is[a].Pos.Line != is[b].Pos.Line {
			return is[a].Pos.Line < is[b].Pos.Line
		}
		return is[a].Message < is[b].Message
	})
}

// Err returns nil when there are no issues, and the sorted list otherwise.
func (is Issues) Err() error {
	if len(is) == 0 {
		return nil
	}
	is.Sort()
	return is
}

// Add appends an issue at pos.
func (is *Issues) Add(pos Position, hint, format string, args ...any) {
	*is = append(*is, Issue{Pos: pos, Message: fmt.Sprintf(format, args...), Hint: hint})
}
