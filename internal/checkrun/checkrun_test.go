package checkrun

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTruncateMarkdown(t *testing.T) {
	t.Parallel()
	short := "### plan\n\nsmall"
	assert.Equal(t, short, TruncateMarkdown(short, 100))

	var b strings.Builder
	b.WriteString("### plan\n")
	for b.Len() < 5000 {
		b.WriteString("<details><summary>repo</summary>\n\n- add `x`\n- add `y`\n\n</details>\n")
	}
	got := TruncateMarkdown(b.String(), 1000)
	assert.LessOrEqual(t, len(got), 1000)
	assert.Contains(t, got, "truncated")
	assert.Equal(t, strings.Count(got, "<details>"), strings.Count(got, "</details>"), "open blocks closed:\n%s", got)

	// GitHub counts bytes: 40,000 check marks are 120,000 bytes, cut to at most 65,535 bytes of
	// valid UTF-8, whole lines only.
	wide := strings.Repeat("✅ ok\n", 40000)
	got = TruncateMarkdown(wide, MaxCheckText)
	assert.LessOrEqual(t, len(got), MaxCheckText)
	assert.True(t, utf8.ValidString(got))
	body, _, _ := strings.Cut(got, "\n\n…")
	for _, line := range strings.Split(body, "\n") {
		assert.Equal(t, "✅ ok", line)
	}
	for n := range 12 {
		assert.True(t, utf8.ValidString(TruncateMarkdown(wide, n)), "limit %d", n)
		assert.LessOrEqual(t, len(TruncateMarkdown(wide, n)), n)
	}
}

// TestTruncateMarkdownCountsBytes: GitHub refuses a check run summary over 65,535 bytes
// ("summary exceeds a maximum bytesize of 65535"), whatever its length in characters; fleetbot's
// Markdown is full of multi-byte characters. A text under the limit in characters but over it
// in bytes is cut, on a character boundary, to at most the limit in bytes.
func TestTruncateMarkdownCountsBytes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < MaxCheckText-1000 {
		b.WriteString("- ✅ cluster → apply — done …\n")
	}
	s := b.String()
	require.Less(t, utf8.RuneCountInString(s), MaxCheckText, "under the limit in characters")
	require.Greater(t, len(s), MaxCheckText, "over the limit in bytes")
	got := TruncateMarkdown(s, MaxCheckText)
	assert.LessOrEqual(t, len(got), MaxCheckText)
	assert.True(t, utf8.ValidString(got), "cut on a character boundary")
	assert.Contains(t, got, "truncated")

	// Every cut point, on a text of 3-byte characters without line breaks.
	long := strings.Repeat("✅", 100)
	for limit := 0; limit <= len(long); limit++ {
		got := TruncateBytes(long, limit)
		assert.LessOrEqual(t, len(got), limit)
		assert.True(t, utf8.ValidString(got), "limit %d", limit)
		assert.Equal(t, limit/3*3, len(got), "limit %d: the longest whole prefix", limit)
	}
	assert.Equal(t, "✅✅", TruncateRunes("✅✅✅", 2))
}
