package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandTree lists every command under root, root included, by its path ("fleetbot plan").
func commandTree(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out = append(out, commandTree(c)...)
	}
	return out
}

// exampleCommands returns the command lines of a cobra Example: "#" comments and blank lines
// dropped, backslash-continued lines joined, leading VAR=value assignments removed.
func exampleCommands(example string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(example, "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur += s + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// shellWords splits a command line as sh would for the quoting our examples use: words
// separated by blanks, '...' and "..." quoting (no expansions).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	require.Zero(t, quote, "unbalanced quote in example %q", line)
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestEveryCommandHasExamples: every command's help has an Examples: section, and every
// example names a real command with flags it takes (parsed as the CLI would parse them), so a
// renamed flag cannot leave a stale example behind.
func TestEveryCommandHasExamples(t *testing.T) {
	for _, c := range commandTree((&frontend{stdout: io.Discard, stderr: io.Discard}).rootCommand()) {
		path := c.CommandPath()
		t.Run(path, func(t *testing.T) {
			require.NotEmpty(t, strings.TrimSpace(c.Example), "%s has no Example", path)
			assert.Contains(t, c.UsageString(), "Examples:\n", "%s help", path)
			lines := exampleCommands(c.Example)
			require.NotEmpty(t, lines, "%s: its Example has no command", path)
			itself := false
			for _, line := range lines {
				words := shellWords(t, line)
				for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
					words = words[1:] // VAR=value before the command
				}
				for i, w := range words {
					if w == ">" || w == "|" {
						words = words[:i] // a redirection or a pipe after the command
						break
					}
				}
				require.NotEmpty(t, words, "%s: example %q", path, line)
				require.Equal(t, "fleetbot", words[0], "%s: example %q runs fleetbot", path, line)
				root := (&frontend{stdout: io.Discard, stderr: io.Discard}).rootCommand()
				root.InitDefaultHelpFlag()
				root.InitDefaultVersionFlag()
				found, rest, err := root.Find(words[1:])
				require.NoError(t, err, "%s: example %q", path, line)
				itself = itself || found.CommandPath() == path || strings.HasPrefix(found.CommandPath(), path+" ")
				require.NoError(t, found.ParseFlags(rest), "%s: example %q", path, line)
				assert.NoError(t, found.ValidateArgs(found.Flags().Args()), "%s: example %q", path, line)
			}
			assert.True(t, itself, "%s: no example runs it", path)
		})
	}
}

// TestHelpShowsEachDefaultOnce: no flag's help line says its default twice (a usage string
// naming the default, and pflag adding "(default ...)" again).
func TestHelpShowsEachDefaultOnce(t *testing.T) {
	for _, c := range commandTree((&frontend{stdout: io.Discard, stderr: io.Discard}).rootCommand()) {
		for _, line := range strings.Split(c.UsageString(), "\n") {
			assert.LessOrEqual(t, strings.Count(line, "(default"), 1, "%s: %s", c.CommandPath(), line)
		}
	}
}
