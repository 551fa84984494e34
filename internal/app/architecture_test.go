package app

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moduleRoot is the repository root, two levels above this package.
var moduleRoot = filepath.Join("..", "..")

// modulePath is the import path prefix of fleetbot's packages.
const modulePath = "github.com/fleetbot-io/fleetbot/"

// floor is one row of the table in docs/architecture.md.
type floor struct {
	floor   string
	allowed []string // fleetbot packages it may import, relative to the module
	line    int
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readFloors parses the table of docs/architecture.md: package -> its row.
func readFloors(t *testing.T) map[string]floor {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot, "docs", "architecture.md"))
	require.NoError(t, err)
	defer f.Close()
	floors := map[string]floor{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) != 6 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`") {
			continue // not a package row
		}
		pkg := strings.Trim(strings.TrimSpace(cells[2]), "`")
		var allowed []string
		for _, m := range backticked.FindAllStringSubmatch(cells[4], -1) {
			allowed = append(allowed, m[1])
		}
		require.NotContains(t, floors, pkg, "docs/architecture.md:%d: %s has two rows", n, pkg)
		floors[pkg] = floor{floor: strings.TrimSpace(cells[1]), allowed: allowed, line: n}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, floors, "docs/architecture.md has the table of floors")
	return floors
}

// goPackage is one package of the module as go list sees it (tests excluded).
type goPackage struct {
	imports []string // direct imports
	deps    []string // every package it depends on, transitively (go list -deps)
}

// listPackages lists every package of the module with its direct and transitive imports.
func listPackages(t *testing.T) map[string]goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to list the packages")
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, "./...")
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	pkgs := map[string]goPackage{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		require.Len(t, parts, 3, line)
		pkgs[strings.TrimPrefix(parts[0], modulePath)] = goPackage{imports: strings.Fields(parts[1]), deps: strings.Fields(parts[2])}
	}
	return pkgs
}

// TestArchitecture: every package sits on a floor of docs/architecture.md and imports only
// the fleetbot packages its row allows; the CLI reaches GitHub, git and kustomize only
// through the application layer and the adapters.
func TestArchitecture(t *testing.T) {
	t.Parallel()
	floors := readFloors(t)
	pkgs := listPackages(t)
	for pkg, p := range pkgs {
		row, ok := floors[pkg]
		if !assert.True(t, ok, "package %s has no row in docs/architecture.md: put it on a floor", pkg) {
			continue
		}
		for _, imp := range p.imports {
			if rel, ok := strings.CutPrefix(imp, modulePath); ok {
				assert.True(t, slices.Contains(row.allowed, rel),
					"%s (%s floor) imports %s, which docs/architecture.md:%d does not allow: call the floor below through its package, or change the table with a reason",
					pkg, row.floor, rel, row.line)
			}
		}
	}
	for pkg, row := range floors {
		assert.Contains(t, pkgs, pkg, "docs/architecture.md:%d names %s, which is not a package", row.line, pkg)
	}
	for _, imp := range pkgs["cmd/bot"].imports {
		for _, banned := range []string{"github.com/google/go-github/", "github.com/go-git/", "github.com/bradleyfalzon/ghinstallation", "sigs.k8s.io/kustomize/"} {
			assert.False(t, strings.HasPrefix(imp, banned), "cmd/bot imports %s: the CLI reaches it through internal/app or an adapter", imp)
		}
	}
	// The pure floor does no GitHub and no git I/O, not even through a dependency (go list
	// -deps): only go-git's hash types, for tree hashes computed locally.
	for pkg, row := range floors {
		if row.floor != "pure" {
			continue
		}
		for _, dep := range pkgs[pkg].deps {
			io := strings.HasPrefix(dep, "github.com/google/go-github/") || strings.HasPrefix(dep, "github.com/bradleyfalzon/ghinstallation") ||
				(strings.HasPrefix(dep, "github.com/go-git/") && dep != "github.com/go-git/go-git/v5/plumbing" && dep != "github.com/go-git/go-git/v5/plumbing/hash")
			assert.False(t, io, "%s (pure floor) depends on %s", pkg, dep)
		}
	}
}

// maxFrontEndLines is the longest a front-end function may be: a front end adapts, the
// application layer does the work.
const maxFrontEndLines = 80

// TestFrontEndFunctionsAreShort: no function of the CLI, the Action, serve's ingress, the webhook
// service or serve's composition root is longer than maxFrontEndLines (declaration to closing brace).
func TestFrontEndFunctionsAreShort(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"cmd/bot", "internal/action", "internal/ingress", "internal/webhook", "internal/serve"} {
		files, err := filepath.Glob(filepath.Join(moduleRoot, dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		fset := token.NewFileSet()
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			require.NoError(t, err)
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.Body.End())
				lines := end.Line - start.Line + 1
				assert.LessOrEqual(t, lines, maxFrontEndLines, "%s: %s is %d lines; move the work into internal/app or split it",
					fmt.Sprintf("%s:%d", filepath.ToSlash(filepath.Join(dir, filepath.Base(file))), start.Line), fn.Name.Name, lines)
			}
		}
	}
}

// TestFrontEndsCallTheApplicationLayer: the rows of the front ends in docs/architecture.md
// allow only the application layer, adapters, other front ends and internal/report (issue
// 16): a front end reaches every floor below through internal/app.
func TestFrontEndsCallTheApplicationLayer(t *testing.T) {
	t.Parallel()
	floors := readFloors(t)
	for pkg, row := range floors {
		if row.floor != "front end" {
			continue
		}
		for _, imp := range row.allowed {
			if imp == "internal/report" {
				continue // what every front end prints
			}
			below, ok := floors[imp]
			if assert.True(t, ok, "docs/architecture.md:%d: %s may import %s, which has no row", row.line, pkg, imp) {
				assert.Contains(t, []string{"application", "adapter", "front end"}, below.floor,
					"docs/architecture.md:%d: front end %s may import %s (%s floor): call it through internal/app", row.line, pkg, imp, below.floor)
			}
		}
	}
}

// TestAdaptersImportNoFrontEnd: no adapter imports a front end, even transitively (go list
// -deps): an adapter implements the small interfaces a front end declares, and the front end's
// composition root wires it in (issue 32: internal/webhook/githubapi imported internal/webhook).
func TestAdaptersImportNoFrontEnd(t *testing.T) {
	t.Parallel()
	floors := readFloors(t)
	pkgs := listPackages(t)
	for pkg, row := range floors {
		if row.floor != "adapter" {
			continue
		}
		for _, allowed := range row.allowed {
			assert.NotEqual(t, "front end", floors[allowed].floor, "docs/architecture.md:%d: adapter %s may import front end %s: declare the interface it serves above, and wire it in the composition root", row.line, pkg, allowed)
		}
		for _, dep := range pkgs[pkg].deps {
			rel, ok := strings.CutPrefix(dep, modulePath)
			if !ok {
				continue
			}
			if below, ok := floors[rel]; ok {
				assert.NotEqual(t, "front end", below.floor, "adapter %s depends on front end %s", pkg, rel)
			}
		}
	}
}

// productWords are what only fleetbot's service knows of its jobs: the generic job queue names
// none of them, as a word, in an identifier or a string (issue 32: "a generic keyed job queue, no
// product knowledge").
var productWords = map[string]bool{"drift": true, "drifts": true, "apply": true, "applies": true, "applied": true,
	"owner": true, "owners": true, "repo": true, "repos": true, "fleet": true, "github": true, "webhook": true,
	"tenant": true, "rollout": true, "kind": true, "check": true}

// words splits an identifier or a literal into lower-case words (camelCase, snake_case, spaces).
func words(text string) []string {
	var out []string
	var w []rune
	flush := func() {
		if len(w) > 0 {
			out = append(out, strings.ToLower(string(w)))
			w = w[:0]
		}
	}
	prevLower := false
	for _, r := range text {
		switch {
		case unicode.IsUpper(r):
			if prevLower {
				flush()
			}
			w = append(w, r)
			prevLower = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			w = append(w, r)
			prevLower = true
		default:
			flush()
			prevLower = false
		}
	}
	flush()
	return out
}

// TestJobQueueKnowsNoProduct: internal/jobqueue imports no fleetbot package, even transitively,
// and no identifier or string literal of its code names a product concept (a drift, an apply, an
// owner, a repo...): the service supplies its rules as a jobqueue.Policy.
func TestJobQueueKnowsNoProduct(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	p, ok := pkgs["internal/jobqueue"]
	require.True(t, ok, "internal/jobqueue exists")
	for _, dep := range p.deps {
		assert.False(t, strings.HasPrefix(dep, modulePath), "internal/jobqueue depends on %s: the queue is generic; the service passes what it needs (a Policy, Metrics)", dep)
	}
	files, err := filepath.Glob(filepath.Join(moduleRoot, "internal", "jobqueue", "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0) // comments left out: they may explain what serve does with it
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			var text string
			switch n := n.(type) {
			case *ast.Ident:
				text = n.Name
			case *ast.BasicLit:
				text = n.Value
			default:
				return true
			}
			for _, w := range words(text) {
				assert.False(t, productWords[w], "%s: %q names a product concept (%s) in the generic job queue: make it a Policy parameter", fset.Position(n.Pos()), text, w)
			}
			return true
		})
	}
}
