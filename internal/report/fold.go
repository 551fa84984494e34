package report

import (
	"fmt"
	"strings"
)

// foldNamed is how many of the places that share a warning its folded line names; the rest
// are counted ("and 540 more").
const foldNamed = 3

// Folded is one warning text and every place that has it: a warning repeated for 543 repos is
// one line saying so, not 543 lines.
type Folded struct {
	Text string
	// At are the places (repos, or file:line of the control repo) in the order first seen.
	At []string
	// Noun names a place in the plural ("repos", "places").
	Noun string
}

// Where names the places: the one place, or "543 repos: a, b, c and 540 more".
func (f Folded) Where() string {
	if len(f.At) == 1 {
		return f.At[0]
	}
	named := f.At[:min(len(f.At), foldNamed)]
	s := fmt.Sprintf("%d %s: %s", len(f.At), f.Noun, strings.Join(named, ", "))
	if more := len(f.At) - len(named); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// Fold groups texts[i] found at at[i] by text, in the order each text first appears.
func Fold(texts, at []string, noun string) []Folded {
	var out []Folded
	index := map[string]int{}
	for i, t := range texts {
		j, ok := index[t]
		if !ok {
			j = len(out)
			index[t] = j
			out = append(out, Folded{Text: t, Noun: noun})
		}
		out[j].At = append(out[j].At, at[i])
	}
	return out
}

// FoldRepoWarnings folds the warnings of every repo (Repo.Warnings) by text.
func FoldRepoWarnings(repos []Repo) []Folded {
	var texts, at []string
	for _, r := range repos {
		for _, w := range r.Warnings {
			texts, at = append(texts, w), append(at, r.Repo)
		}
	}
	return Fold(texts, at, "repos")
}

// FoldProblems folds problems (the control repo's warnings) by message and hint: the same
// finding in many files is one entry naming where.
func FoldProblems(ps []Problem) []FoldedProblem {
	var texts, at []string
	byText := map[string]Problem{}
	for _, p := range ps {
		key := p.Message + "\x00" + p.Hint
		byText[key] = p
		texts, at = append(texts, key), append(at, p.Pos())
	}
	folded := Fold(texts, at, "places")
	out := make([]FoldedProblem, len(folded))
	for i, f := range folded {
		p := byText[f.Text]
		out[i] = FoldedProblem{Folded: Folded{Text: p.Message, At: f.At, Noun: f.Noun}, Hint: p.Hint}
	}
	return out
}

// FoldedProblem is a folded control-repo finding with its hint.
type FoldedProblem struct {
	Folded
	Hint string
}

// String is "file:line: message" for one place, "3 places: a, b, c: message" for several,
// with the hint on the next line.
func (f FoldedProblem) String() string {
	s := f.Where() + ": " + f.Text
	if f.Hint != "" {
		s += "\n    hint: " + f.Hint
	}
	return s
}
