package fanout

import (
	"bytes"
	"sort"
	"strings"
)

// template is rendered YAML text split at its ${name} references, so that
// substituting values per cluster is a concatenation, not a rescan.
type template struct {
	segs []segment
	vars bool
}

// segment is literal text or, when name is set, a variable reference.
type segment struct {
	lit  string
	name string
}

// compile splits text at Flux-style references: ${name} becomes a variable,
// $${name} the literal ${name}. It returns the names referenced and the
// malformed references (${...} whose content is not a variable name, or an
// unterminated ${), which Flux would reject too.
func compile(text string) (t template, refs, bad []string) {
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.segs = append(t.segs, segment{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '$')
		if j < 0 {
			lit.WriteString(text[i:])
			break
		}
		lit.WriteString(text[i : i+j])
		i += j
		rest := text[i:]
		switch {
		case strings.HasPrefix(rest, "$${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				lit.WriteString(rest)
				i = len(text)
				continue
			}
			lit.WriteString(rest[1 : end+1]) // drop one $
			i += end + 1
		case strings.HasPrefix(rest, "${"):
			end := strings.IndexByte(rest, '}')
			if end < 0 || strings.IndexByte(rest[:end], '\n') >= 0 {
				bad = append(bad, firstLine(rest))
				lit.WriteString("${")
				i += 2
				continue
			}
			name := rest[2:end]
			if !isVarName(name) {
				bad = append(bad, rest[:end+1])
				lit.WriteString(rest[:end+1])
				i += end + 1
				continue
			}
			flush()
			t.segs = append(t.segs, segment{name: name})
			t.vars = true
			refs = append(refs, name)
			i += end + 1
		default:
			lit.WriteByte('$')
			i++
		}
	}
	flush()
	return t, refs, bad
}

// apply renders the template with values; a name without a value becomes
// empty, like Flux does for an unset variable (Render reports required
// values that are missing before it gets here).
func (t template) apply(b *strings.Builder, values map[string]string) {
	for _, s := range t.segs {
		if s.name != "" {
			b.WriteString(values[s.name])
		} else {
			b.WriteString(s.lit)
		}
	}
}

// writeTo writes a template without variables (its literal text).
func (t template) writeTo(b *bytes.Buffer) {
	for _, s := range t.segs {
		b.WriteString(s.lit)
	}
}

// isVarName reports whether s is a Flux variable name:
// ^[_[:alpha:]][_[:alpha:][:digit:]]*$.
func isVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

// uniq sorts and deduplicates names.
func uniq(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}
