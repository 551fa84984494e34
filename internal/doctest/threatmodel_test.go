package doctest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThreatModelTestsExist: every test docs/security.md's threat model names as the proof of a
// control is a test function of the module (a renamed or deleted test fails here, not silently
// in the table), and every row names at least one.
func TestThreatModelTestsExist(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	require.NoError(t, err)
	text := string(doc)
	start, end := strings.Index(text, "<!-- threat-model -->"), strings.Index(text, "<!-- /threat-model -->")
	require.True(t, start >= 0 && end > start, "docs/security.md has no <!-- threat-model --> table")
	table := text[start:end]

	defined := map[string]bool{}
	funcRe := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	root := filepath.Join("..", "..")
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == ".cache") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcRe.FindAllStringSubmatch(string(data), -1) {
			defined[m[1]] = true
		}
		return nil
	}))

	rows, named := 0, 0
	nameRe := regexp.MustCompile("`(Test\\w+)`")
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "persona" {
			continue
		}
		rows++
		proof := cells[4]
		names := nameRe.FindAllStringSubmatch(proof, -1)
		assert.NotEmpty(t, names, "row %q names no test", strings.TrimSpace(line))
		for _, m := range names {
			named++
			assert.True(t, defined[m[1]], "docs/security.md names %s, which no _test.go file defines", m[1])
		}
	}
	assert.Greater(t, rows, 10, "the threat model table has its rows")
	assert.Greater(t, named, rows)
}
