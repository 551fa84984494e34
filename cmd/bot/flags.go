package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// choiceValue is a string flag that accepts only the listed values: a typo is refused when the
// flag is parsed (from the command line or FLEETBOT_* variables), with the allowed values.
type choiceValue struct {
	p       *string
	allowed []string
}

// choiceVar defines a flag that takes one of allowed; def must be one of them.
func choiceVar(fs *pflag.FlagSet, p *string, name, def string, allowed []string, usage string) {
	*p = def
	fs.Var(&choiceValue{p: p, allowed: allowed}, name, fmt.Sprintf("%s: %s (default %s)", usage, strings.Join(allowed, ", "), def))
}

func (c *choiceValue) String() string { return *c.p }
func (c *choiceValue) Type() string   { return "string" }

func (c *choiceValue) Set(s string) error {
	if !slices.Contains(c.allowed, s) {
		return fmt.Errorf("want one of %s", strings.Join(c.allowed, ", "))
	}
	*c.p = s
	return nil
}

// minIntValue is an int flag with a lower bound, refused when parsed.
type minIntValue struct {
	p   *int
	min int
}

// minIntVar defines an int flag that must be at least min.
func minIntVar(fs *pflag.FlagSet, p *int, name string, def, min int, usage string) {
	*p = def
	fs.Var(&minIntValue{p: p, min: min}, name, usage)
}

func (m *minIntValue) String() string { return strconv.Itoa(*m.p) }
func (m *minIntValue) Type() string   { return "int" }

func (m *minIntValue) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	if v < m.min {
		return fmt.Errorf("want at least %d", m.min)
	}
	*m.p = v
	return nil
}

// logLevels are the values of --log-level.
func logLevels() []string { return []string{"debug", "info", "warn", "error"} }

// formats are the values of --format.
func formats() []string { return []string{formatText, formatMarkdown, formatJSON} }
