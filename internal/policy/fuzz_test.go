package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	fuzzAccess = Access{Teams: map[string]Role{"platform": RoleAdmin, "devs": RolePush, "readers": RolePull},
		Collaborators: map[string]Role{"alice": RolePush}}
	fuzzOrg = Org{Name: "acme", Teams: []string{"platform", "devs", "readers"}}
)

// TestAttackLongLineHidesCodeownersErrors: a CODEOWNERS line over 64 KiB (a long comment)
// used to end the check there (bufio.Scanner's limit), so an edited CODEOWNERS handing a path
// to an unknown owner after it passed as clean.
func TestAttackLongLineHidesCodeownersErrors(t *testing.T) {
	content := "# " + strings.Repeat("x", 70<<10) + "\n* @acme/platform\n/apps/ @evil/team\n"
	got := CheckCODEOWNERS(".github/CODEOWNERS", []byte(content), "acme", fuzzOrg, fuzzAccess)
	if assert.Len(t, got, 1) {
		assert.Equal(t, ".github/CODEOWNERS:3: Unknown owner: team @evil/team belongs to another organization than acme", got[0].String())
	}
}

// FuzzCodeowners checks a CODEOWNERS file. Invariants: no panic; every error names the
// file, a line of it and one of GitHub's kinds; the check is line by line (the errors of the
// file are the errors of each line alone, renumbered), so nothing one line holds can hide
// another line's errors; and the file fleetbot writes for the input's team slugs, once they
// exist with write access, checks clean.
func FuzzCodeowners(f *testing.F) {
	for _, s := range []string{
		"* @acme/platform\n/apps/ @acme/devs\n",
		"# comment\n* @acme/platform\n/apps/ @acme/devs @alice dev@example.com # trailing\n/docs/ @acme/readers\n",
		"/x/ @acme/ghosts @other/platform @bob\n!/secret @acme/platform\n/[ab]/ @acme/platform\n/y/ platform\n",
		"*\r\n/apps/\t@acme/devs\r\n",
		"",
	} {
		f.Add([]byte(s), "devs")
	}
	kinds := map[string]bool{"Invalid pattern": true, "Unknown owner": true, "Invalid owner": true}
	f.Fuzz(func(t *testing.T, content []byte, slug string) {
		const path = ".github/CODEOWNERS"
		got := CheckCODEOWNERS(path, content, "acme", fuzzOrg, fuzzAccess)
		lines := strings.Split(string(content), "\n")
		var want []CodeownersError
		for i, l := range lines {
			for _, e := range CheckCODEOWNERS(path, []byte(l), "acme", fuzzOrg, fuzzAccess) {
				e.Line = i + 1
				want = append(want, e)
			}
		}
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("the file's errors are not its lines' errors:\n got %v\nwant %v", got, want)
		}
		for _, e := range got {
			if e.Path != path || e.Line < 1 || e.Line > len(lines) || !kinds[e.Kind] || e.Message == "" {
				t.Fatalf("malformed error %s (file has %d lines)", e, len(lines))
			}
		}

		// A valid slug (control validation allows [a-z0-9._-]+) owning a path checks clean.
		if slug == "" || strings.Trim(slug, "abcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
			return
		}
		access := Access{Teams: map[string]Role{"platform": RoleAdmin, slug: RolePush}}
		org := Org{Name: "acme", Teams: []string{"platform", slug}}
		gen := CODEOWNERS("acme", []Rule{{Pattern: "*", Teams: []string{"platform"}}, {Pattern: "/apps/", Teams: []string{slug}}})
		if errs := CheckCODEOWNERS(path, gen, "acme", org, access); len(errs) > 0 {
			t.Fatalf("generated CODEOWNERS for %q is not clean: %v\n%s", slug, errs, gen)
		}
		if !strings.Contains(string(gen), fmt.Sprintf("/apps/ @acme/%s\n", slug)) {
			t.Fatalf("generated CODEOWNERS lost the rule for %q:\n%s", slug, gen)
		}
	})
}
