package pr

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/manifest"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TrailerSource is the commit trailer naming the control repo commit a bot
// commit was rendered from.
const TrailerSource = "Fleetbot-Source"

// TrailerTree is the commit trailer carrying the hash of the tree fleetbot
// rendered for a bot commit. A commit whose tree is the one its trailer names
// is fleetbot's, whoever GitHub says committed it (an App's commits are
// committed by "GitHub", a token's are unsigned, GHES signs nothing); a human
// edit changes the tree and no longer matches. See ours.
const TrailerTree = "Fleetbot-Tree"

// marker is the state fleetbot keeps, hidden, in the PR body. The SHAs are
// content addresses, so when the bot branch head equals Head, everything
// else recorded is trustworthy without another read.
type marker struct {
	Head    string `json:"head,omitempty"`
	Base    string `json:"base,omitempty"`
	Tree    string `json:"tree,omitempty"`
	Source  string `json:"source,omitempty"`
	Blocked bool   `json:"blocked,omitempty"`
	// Waves are the lists of rollout waves the source revision was rolled out in
	// (Options.Waves).
	Waves []string `json:"waves,omitempty"`
	// Rollback, on a rollback pull request, is the control-repo revision it rolls back, and
	// Failed the tree that revision left here (see Restore).
	Rollback string `json:"rollback,omitempty"`
	Failed   string `json:"failed,omitempty"`
	// Held, on a rollback pull request, says it was opened without the auto-merge its wave
	// asks for because fleetbot could not merge then (a pause, the change windows): the first
	// Restore allowed to merge replaces it by one set to auto-merge (see Restore).
	Held bool `json:"held,omitempty"`
}

const markerPrefix = "<!-- fleetbot:state "

// findMarker locates the first marker of body: the comment spans body[start:end], its JSON
// object body[start+len(markerPrefix):jsonEnd]. A marker is the prefix, a JSON object on the
// same line and " -->" right after its first closing brace that is followed by " -->" (the
// regular expression `<!-- fleetbot:state (\{[^\n]*?\}) -->`, without its cost: every plan
// of every repo reads the marker of its pull request).
func findMarker(body string) (start, jsonEnd, end int, ok bool) {
	const suffix = "} -->"
	for from := 0; ; {
		i := strings.Index(body[from:], markerPrefix)
		if i < 0 {
			return 0, 0, 0, false
		}
		start = from + i
		rest := body[start+len(markerPrefix):]
		if strings.HasPrefix(rest, "{") {
			line, _, _ := strings.Cut(rest, "\n")
			if j := strings.Index(line, suffix); j >= 0 {
				jsonEnd = start + len(markerPrefix) + j + 1
				return start, jsonEnd, jsonEnd + len(suffix) - 1, true
			}
		}
		from = start + 1
	}
}

func parseMarker(body string) (marker, bool) {
	var m marker
	start, jsonEnd, _, ok := findMarker(body)
	if !ok {
		return m, false
	}
	if err := json.Unmarshal([]byte(body[start+len(markerPrefix):jsonEnd]), &m); err != nil {
		return marker{}, false
	}
	return m, true
}

// HasMarker reports whether a pull request body carries fleetbot's state marker: the pull
// request is one fleetbot opened.
func HasMarker(body string) bool {
	_, ok := parseMarker(body)
	return ok
}

// String renders the marker as the hidden HTML comment of a PR body.
func (m marker) String() string {
	b, _ := json.Marshal(m) // a struct of strings, a bool and a string list always marshals
	return markerPrefix + string(b) + " -->"
}

// withMarker replaces (or appends) the marker of body.
func withMarker(body string, m marker) string {
	if start, _, end, ok := findMarker(body); ok {
		return body[:start] + m.String() + body[end:]
	}
	return strings.TrimRight(body, "\n") + "\n\n" + m.String() + "\n"
}

// Title is the title of the fleetbot PR of a target.
func Title(t *fanout.Target) string {
	if t.Removed {
		return fmt.Sprintf("fleetbot: remove %s %s", t.Kind, t.Name)
	}
	return fmt.Sprintf("fleetbot: sync %s %s", t.Kind, t.Name)
}

// CommitMessage is the message of a bot commit rendered from source, whose
// tree is tree.
func CommitMessage(t *fanout.Target, source, tree string) string {
	verb := "sync"
	if t.Removed {
		verb = "remove " + string(t.Kind) + " " + t.Name
	}
	src := source
	if src == "" {
		src = "unknown"
	}
	return fmt.Sprintf("fleetbot: %s from %s\n\n%s: %s\n%s: %s\n", verb, report.ShortSHA(src), TrailerSource, src, TrailerTree, tree)
}

// trailer returns the value of the last trailer key in a commit message ("" when absent).
func trailer(message, key string) string {
	v := ""
	for _, line := range strings.Split(message, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), key+": "); ok {
			v = strings.TrimSpace(rest)
		}
	}
	return v
}

// body renders the PR description: source commit, files and objects changed,
// who must review, and the hidden state marker.
func body(d *Decision, t *fanout.Target, source string, m marker) string {
	var b strings.Builder
	what := "Sync of"
	if t.Removed {
		what = "Removal of the managed content of"
	}
	fmt.Fprintf(&b, "%s %s **%s**, rendered by fleetbot from the control repo.\n\n", what, t.Kind, t.Name)
	if source != "" {
		fmt.Fprintf(&b, "**Source commit:** `%s`\n\n", source)
	}
	if t.Removed {
		b.WriteString("The " + string(t.Kind) + " left the control repo: the files fleetbot managed are removed and Flux prunes what they described. The repo is kept.\n\n")
	}
	if len(d.Notes) > 0 {
		b.WriteString("### What this does\n\n")
		for _, n := range d.Notes {
			b.WriteString("- " + n + "\n")
		}
		b.WriteString("\n")
	}
	files := d.prFiles
	fmt.Fprintf(&b, "### Files (%d)\n\n", len(files))
	if len(files) == 0 {
		b.WriteString("No file changes.\n\n")
	} else {
		b.WriteString("| file | change |\n|---|---|\n")
		for _, f := range files {
			fmt.Fprintf(&b, "| `%s` | %s |\n", f.Path, f.Op)
		}
		b.WriteString("\n")
	}
	if sum := SummarizeObjects(d.Objects); len(sum) > 0 {
		b.WriteString("### Objects\n\n| kind | added | changed | removed |\n|---|---:|---:|---:|\n")
		for _, k := range slices.Sorted(maps.Keys(sum)) {
			c := sum[k]
			fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", k, c.Added, c.Changed, c.Removed)
		}
		b.WriteString("\n<details><summary>Objects by name</summary>\n\n")
		for _, g := range []struct {
			op   string
			objs []manifest.Object
		}{{FileAdded, d.Objects.Added}, {FileChanged, d.Objects.Changed}, {FileRemoved, d.Objects.Removed}} {
			for _, o := range g.objs {
				fmt.Fprintf(&b, "- %s `%s`\n", g.op, o.ID())
			}
		}
		b.WriteString("\n</details>\n\n")
	}
	main := b.String()
	b.Reset()
	b.WriteString("### Review\n\n")
	if len(t.Reviewers) == 0 {
		b.WriteString("No reviewers configured.\n")
	} else {
		rs := append([]string(nil), t.Reviewers...)
		sort.Strings(rs)
		for i, r := range rs {
			rs[i] = "@" + t.Owner + "/" + r
		}
		fmt.Fprintf(&b, "Must be reviewed by %s (code owners of the managed paths).\n", strings.Join(rs, ", "))
	}
	b.WriteString("\nfleetbot updates this PR while the control repo changes. A commit pushed to its branch by anyone else stops those updates.\n\n")
	b.WriteString(m.String())
	b.WriteString("\n")
	return boundBody(main, b.String())
}

// MaxBodyBytes bounds a pull request body fleetbot writes. GitHub refuses a longer body with
// 422 "body is too long (maximum is 65536 characters)"; it documents no limit, and it has been
// measured counting characters for a pull request body and bytes (262,144) for issue bodies and
// comments. A body of at most 65,536 bytes has at most 65,536 characters, so it passes every
// reading of the limit.
// https://docs.github.com/rest/pulls/pulls#create-a-pull-request (the 422),
// https://github.com/dead-claudia/github-limits/pull/13 (the measurements)
const MaxBodyBytes = 65536

// bodyHeadroom is left free below MaxBodyBytes for the marker to grow in later updates
// (withMarker rewrites only the marker of a body GitHub already has).
const bodyHeadroom = 1024

// bodyCutNote ends the part of a pull request body that was cut to fit.
const bodyCutNote = "\n_… cut to fit GitHub's limit on a pull request body; `fleetbot plan` lists every file and object._\n\n"

// boundBody joins the descriptive part of a body (main: what changes, the file and object
// lists, which a large target makes long) and its tail (who reviews, the state marker, never
// cut), cutting main at a line boundary when the whole would exceed MaxBodyBytes less
// bodyHeadroom. A <details> block the cut leaves open is closed.
func boundBody(main, tail string) string {
	limit := MaxBodyBytes - bodyHeadroom
	if len(main)+len(tail) <= limit {
		return main + tail
	}
	const closeDetails = "\n</details>\n"
	budget := limit - len(tail) - len(bodyCutNote) - len(closeDetails)
	if budget < 0 {
		budget = 0
	}
	for budget > 0 && budget < len(main) && !utf8.RuneStart(main[budget]) {
		budget--
	}
	cut := main[:min(budget, len(main))]
	if i := strings.LastIndexByte(cut, '\n'); i >= 0 {
		cut = cut[:i+1]
	}
	if strings.Count(cut, "<details") > strings.Count(cut, "</details>") {
		cut += closeDetails
	}
	return cut + bodyCutNote + tail
}
