// Package checkrun is the vocabulary of a GitHub check run that fleetbot's service and its
// GitHub adapters share: a run's result and annotations, its names, the limits GitHub enforces
// on its output and the truncation that keeps within them. It does no I/O.
package checkrun

import (
	"strings"
	"unicode/utf8"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Check-run limits GitHub enforces
// (https://docs.github.com/rest/checks/runs#create-a-check-run).
const (
	// MaxCheckText is the most BYTES (UTF-8) GitHub accepts in a check run's output summary
	// or text. Its documentation says "65535 characters", but GitHub measures bytes: a
	// longer one is 422 "summary exceeds a maximum bytesize of 65535" (github/docs#35252),
	// and fleetbot's Markdown is full of multi-byte characters (→ ✅ — …).
	MaxCheckText = 65535
	// MaxAnnotations is the most annotations one check run request carries.
	MaxAnnotations = 50
	// MaxAnnotationMessage is the most bytes of an annotation's message ("The maximum size
	// is 64 KB").
	MaxAnnotationMessage = 64 << 10
	// MaxAnnotationTitle is the most characters of an annotation's title ("The maximum size
	// is 255 characters").
	MaxAnnotationTitle = 255
)

// DefaultCheckName is the name of fleetbot's check run on control-repo
// pull requests.
const DefaultCheckName = "fleetbot plan"

// Check conclusions fleetbot uses: those a result's class maps to (report.Class.CheckConclusion)
// and cancelled, for a check fleetbot stopped before it finished.
const (
	ConclusionSuccess   = report.ConclusionSuccess
	ConclusionNeutral   = report.ConclusionNeutral
	ConclusionFailure   = report.ConclusionFailure
	ConclusionCancelled = "cancelled"
)

// Result is the completed state of a check run.
type Result struct {
	Conclusion string
	Title      string
	// Summary and Text are markdown; they are truncated to MaxCheckText bytes.
	Summary, Text string
	// Annotations point at files of the repo checked (at most MaxAnnotations are sent on the
	// control repo, MaxTenantAnnotations on a tenant repo).
	Annotations []Annotation
}

// Annotation is a remark on a line of a file of the repo checked.
type Annotation struct {
	Path    string
	Line    int
	Level   string // notice, warning or failure
	Message string
	Title   string
}

// DefaultTenantCheckName is the name of fleetbot's check run on the pull requests of workspace
// and cluster repos (serve --tenant-check): the status check their branch protection requires
// from fleetbot's own GitHub App.
const DefaultTenantCheckName = "fleetbot tenant"

// MaxTenantAnnotations is the most annotations one tenant check run carries, sent
// MaxAnnotations per request; the summary lists every problem (within MaxCheckText).
const MaxTenantAnnotations = 250

// RolloutCheckName is the name of the check run that shows a rollout's progress on the
// control-repo commit being rolled out (platform spec.rollout.waves).
const RolloutCheckName = "fleetbot rollout"

// truncationNote ends a truncated check run text.
const truncationNote = "\n\n… truncated to fit GitHub's check run limit; run `fleetbot plan` for the full plan.\n"

// TruncateMarkdown returns s if it has at most limit bytes (UTF-8, as GitHub measures a check
// run's text); otherwise a prefix cut at a line boundary, with open <details> blocks and code
// fences closed and a note appended, within limit bytes and valid UTF-8.
func TruncateMarkdown(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// Room for the note and for closing what the cut leaves open.
	budget := limit - len(truncationNote) - 64
	if budget <= 0 {
		return TruncateBytes(truncationNote, limit)
	}
	cut := TruncateBytes(s, budget)
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	var closing strings.Builder
	if strings.Count(cut, "```")%2 == 1 {
		closing.WriteString("\n```")
	}
	// reconcile's markdown never nests <details>; close at most four.
	open := strings.Count(cut, "<details") - strings.Count(cut, "</details>")
	for range min(max(open, 0), 4) {
		closing.WriteString("\n</details>")
	}
	return cut + closing.String() + truncationNote
}

// TruncateBytes returns the longest prefix of s of at most n bytes that does not split a
// UTF-8 sequence (GitHub measures a check run's summary and text, and an annotation's message,
// in bytes).
func TruncateBytes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// TruncateRunes returns s cut to at most n characters (GitHub counts an annotation's title in
// characters).
func TruncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:max(n, 0)])
}
