package ghaction

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// MaxSummaryBytes is the most a step may write to its job summary: "each step is restricted to
// a maximum size of 1MiB ... If more than 1MiB of content is added for a step, then the upload
// for the step will fail and an error annotation will be created"
// (https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands#step-isolation-and-limits):
// a larger one shows nothing at all.
const MaxSummaryBytes = 1 << 20

// SetOutput appends the step output name=value to the GITHUB_OUTPUT file at path, in the
// multi-line form "name<<DELIM\nvalue\nDELIM" with a random delimiter, so any value is safe.
func SetOutput(path, name, value string) error {
	if path == "" {
		return errors.New("setting step output " + name + ": GITHUB_OUTPUT not set")
	}
	if name == "" || strings.ContainsAny(name, "\r\n") || strings.Contains(name, "<<") || strings.Contains(name, "=") {
		return fmt.Errorf("setting step output: invalid name %q", name)
	}
	var delim string
	for {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("setting step output %s: %w", name, err)
		}
		delim = "ghadelimiter_" + hex.EncodeToString(b[:])
		if !strings.Contains(value, delim) {
			break
		}
	}
	return appendFile(path, name+"<<"+delim+"\n"+value+"\n"+delim+"\n")
}

// ReadOutputs parses a GITHUB_OUTPUT file (both name=value and name<<DELIM forms), as the
// runner does after the step; later values win.
func ReadOutputs(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			closed := false
			for sc.Scan() {
				if sc.Text() == delim {
					closed = true
					break
				}
				val = append(val, sc.Text())
			}
			if !closed {
				return nil, fmt.Errorf("%s: output %s: delimiter %s not found", path, name, delim)
			}
			out[name] = strings.Join(val, "\n")
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: invalid line %q", path, line)
		}
		out[name] = val
	}
	return out, sc.Err()
}

// AppendSummary appends markdown to the job summary file at path (GITHUB_STEP_SUMMARY),
// cut with a note to stay under MaxSummaryBytes together with what the file already holds.
func AppendSummary(path, markdown string) error {
	if path == "" {
		return errors.New("writing the job summary: GITHUB_STEP_SUMMARY not set")
	}
	used := int64(0)
	if fi, err := os.Stat(path); err == nil {
		used = fi.Size()
	}
	room := MaxSummaryBytes - int(used)
	if room <= 0 {
		return nil
	}
	return appendFile(path, Truncate(markdown, room, "\n\n_… cut to fit GitHub's job summary limit._\n"))
}

// Truncate returns s when it fits in max bytes, and otherwise s cut at the last line break
// that leaves room for note, followed by note ("" when not even note fits). GitHub caps job summaries (MaxSummaryBytes)
// and comment bodies (65,536 characters).
func Truncate(s string, max int, note string) string {
	if len(s) <= max {
		return s
	}
	keep := max - len(note)
	if keep < 0 {
		return ""
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	cut := s[:keep]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + note
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
