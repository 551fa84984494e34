package ghaction

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Level is the severity of an annotation.
type Level string

// Annotation levels, as the workflow commands name them.
const (
	LevelError   Level = "error"
	LevelWarning Level = "warning"
	LevelNotice  Level = "notice"
)

// Annotation is a message the runner shows on the run and, with File and Line, on that line
// of the pull request's diff. File is relative to the repository root (GITHUB_WORKSPACE).
type Annotation struct {
	Level   Level
	File    string
	Line    int
	EndLine int
	Title   string
	Message string
}

// MaxAnnotations is how many annotations of one level a step shows: "GitHub Actions are
// limited to 10 warning annotations and 10 error annotations per step"
// (https://docs.github.com/en/rest/checks/runs#update-a-check-run, output.annotations); the
// runner drops the rest unseen. Notices are held to the same number.
const MaxAnnotations = 10

// Commands writes workflow commands (::name key=value::data) to w, the step's stdout.
type Commands struct {
	w io.Writer
	// shown and held count the annotations of each level written and held back (past
	// MaxAnnotations-1, the last place kept for Overflow's count).
	shown, held map[Level]int
}

// NewCommands returns a Commands writing to w.
func NewCommands(w io.Writer) *Commands {
	return &Commands{w: w, shown: map[Level]int{}, held: map[Level]int{}}
}

// Mask asks the runner to replace secret with *** in every later log line. A multi-line
// secret (a PEM key) is masked line by line, since the runner matches masks per line; blank
// lines and PEM armour lines ("-----BEGIN ...") are not secret and are skipped.
func (c *Commands) Mask(secret string) {
	for _, line := range strings.Split(strings.ReplaceAll(secret, "\r\n", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "-----") {
			continue
		}
		fmt.Fprintf(c.w, "::add-mask::%s\n", escapeData(line))
	}
}

// Annotate writes a (level) annotation; past MaxAnnotations-1 of its level it is held back
// and counted, for Overflow to say so in the last place GitHub shows.
func (c *Commands) Annotate(a Annotation) {
	level := a.Level
	if level == "" {
		level = LevelError
	}
	if c.shown == nil {
		c.shown, c.held = map[Level]int{}, map[Level]int{}
	}
	if c.shown[level] >= MaxAnnotations-1 {
		c.held[level]++
		return
	}
	c.shown[level]++
	c.write(level, a)
}

// Overflow writes, for each level whose annotations Annotate held back, one annotation counting
// them and saying where they all are (where, e.g. "the job summary").
func (c *Commands) Overflow(where string) {
	for _, level := range []Level{LevelError, LevelWarning, LevelNotice} {
		if n := c.held[level]; n > 0 {
			c.write(level, Annotation{Level: level, Title: "fleetbot", Message: fmt.Sprintf(
				"%d more %s annotations not shown (GitHub shows %d per step): %s has them all", n, level, MaxAnnotations, where)})
			c.shown[level]++
			c.held[level] = 0
		}
	}
}

// write writes annotation a at level.
func (c *Commands) write(level Level, a Annotation) {
	var props []string
	add := func(k, v string) {
		if v != "" {
			props = append(props, k+"="+escapeProperty(v))
		}
	}
	add("file", a.File)
	if a.Line > 0 {
		add("line", strconv.Itoa(a.Line))
		if a.EndLine > a.Line {
			add("endLine", strconv.Itoa(a.EndLine))
		}
	}
	add("title", a.Title)
	cmd := "::" + string(level)
	if len(props) > 0 {
		cmd += " " + strings.Join(props, ",")
	}
	fmt.Fprintf(c.w, "%s::%s\n", cmd, escapeData(a.Message))
}

// Group starts a collapsible group of log lines titled title; EndGroup ends it.
func (c *Commands) Group(title string) { fmt.Fprintf(c.w, "::group::%s\n", escapeData(title)) }

// EndGroup ends the group Group started.
func (c *Commands) EndGroup() { fmt.Fprintln(c.w, "::endgroup::") }

// escapeData escapes a command's message as the Actions toolkit does.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a command property value: the data escapes plus ':' and ','.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
