package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// The usage names the choices only: the help prints the default itself ((default "text")).
	fs.Var(&choiceValue{p: p, allowed: allowed}, name, fmt.Sprintf("%s: %s", usage, strings.Join(allowed, ", ")))
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

// formatVar defines a command's --format (-o) flag: text (default) or one of allowed; json is
// fleetbot's one report (internal/report, docs/report.md).
func formatVar(fs *pflag.FlagSet, p *string, allowed []string) {
	*p = formatText
	fs.VarP(&choiceValue{p: p, allowed: allowed}, "format", "o", "output format: "+strings.Join(allowed, ", "))
}

// detailVar defines --detail: list every repo, not only those that change (text and markdown).
func detailVar(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "detail", false, "list every repo (and, without --forge, every file), not only the repos that change; the JSON always has every repo")
}

// minInt64Value is an int64 flag with a lower bound, refused when parsed.
type minInt64Value struct {
	p   *int64
	min int64
}

// minInt64Var defines an int64 flag that must be at least min.
func minInt64Var(fs *pflag.FlagSet, p *int64, name string, def, min int64, usage string) {
	*p = def
	fs.Var(&minInt64Value{p: p, min: min}, name, usage)
}

func (m *minInt64Value) String() string { return strconv.FormatInt(*m.p, 10) }
func (m *minInt64Value) Type() string   { return "int" }

func (m *minInt64Value) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	if v < m.min {
		return fmt.Errorf("want at least %d", m.min)
	}
	*m.p = v
	return nil
}

// durationValue is a duration flag with a lower bound: more than zero (a zero or negative value
// used to fall back to the default silently), or, for a delay, zero or more.
type durationValue struct {
	p         *time.Duration
	allowZero bool
}

// positiveDurationVar defines a duration flag that must be more than zero.
func positiveDurationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{p: p}, name, usage)
}

// delayVar defines a duration flag that must be 0 (no delay) or more.
func delayVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{p: p, allowZero: true}, name, usage)
}

func (d *durationValue) String() string { return d.p.String() }
func (d *durationValue) Type() string   { return "duration" }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	switch {
	case err != nil && d.allowZero:
		return fmt.Errorf("want a duration such as 100ms or 1s (0: none)")
	case err != nil:
		return fmt.Errorf("want a duration such as 90s, 10m or 1h")
	case d.allowZero && v < 0:
		return fmt.Errorf("want 0s or more")
	case !d.allowZero && v <= 0:
		return fmt.Errorf("want more than 0s")
	}
	*d.p = v
	return nil
}
