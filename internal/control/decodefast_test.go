package control

import (
	"io/fs"
	"os"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// decodeBothWays decodes data into a fresh value of out's type through decode (the parsed tree
// when every key is known) and through decodeStrict (the text, strictly), and requires the same
// value, the same result and the same issues.
func decodeBothWays(t *testing.T, file string, data []byte, out any) (known bool) {
	t.Helper()
	var pis Issues
	d := parseDocument(file, data, &pis)
	if d == nil {
		return false
	}
	known = allKnown(d.root, reflect.TypeOf(out), map[reflect.Type]map[string]reflect.Type{})
	typ := reflect.TypeOf(out).Elem()
	fast, strict := reflect.New(typ).Interface(), reflect.New(typ).Interface()
	var fis, sis Issues
	fok := d.decode(fast, &fis)
	sok := d.decodeStrict(strict, &sis)
	require.Equal(t, sok, fok, "%s: result", file)
	require.Equal(t, sis.Error(), fis.Error(), "%s: issues", file)
	require.Equal(t, strict, fast, "%s: decoded value", file)
	return known
}

// docType is the decoding target of a control file, as the loader picks it.
func docType(file string) any {
	switch {
	case file == "platform.yaml":
		return &platformDoc{}
	case strings.HasPrefix(file, "clusters/"):
		return &Cluster{}
	case strings.HasPrefix(file, "workspaces/"):
		return &Workspace{}
	case path.Base(file) == "app.yaml":
		return &App{}
	}
	return nil
}

// TestDecodeFastEqualsStrict: decoding the parsed tree gives what the strict decoder of the
// text gives, for the example repo, a generated fleet and documents with unknown fields, wrong
// types, aliases, merge keys, odd keys and empty parts.
func TestDecodeFastEqualsStrict(t *testing.T) {
	files := map[string][]byte{}
	for p, f := range fleetgen.Generate(fleetgen.Options{Clusters: 60, Apps: 8, Seed: 4}) {
		files["gen:"+p] = f.Data
	}
	root := os.DirFS("../../testdata/control")
	require.NoError(t, fs.WalkDir(root, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		files[p] = data
		return err
	}))
	fromTree := 0
	for p, data := range files {
		if out := docType(strings.TrimPrefix(p, "gen:")); out != nil && decodeBothWays(t, p, data, out) {
			fromTree++
		}
	}
	require.Greater(t, fromTree, 60, "the generated fleet's files decode from the parsed tree")
	head := "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c1\n"
	for i, body := range []string{
		"spec:\n  admins: [a]\n",
		"spec:\n  admin: [a]\n",
		"spec:\n  admins: a\n",
		"spec:\n  admins: [a]\n  values: {x: 1, y: [2]}\n",
		"spec:\n",
		"spec: ~\n",
		"spec: []\n",
		"spec:\n  values:\n",
		"spec: &s {admins: [a]}\nextra: *s\n",
		"spec:\n  <<: {admins: [a]}\n",
		"spec:\n  1: x\n",
		"spec:\n  ? [a]\n  : x\n",
		"spec:\n  workspace: !!int 3\n",
		"spec:\n  values: {a: {b: c}}\n",
		"metadata2: {}\n",
		"spec:\n  admins: [a]\n  admins: [b]\n",
	} {
		decodeBothWays(t, "clusters/c"+string(rune('a'+i))+".yaml", []byte(head+body), &Cluster{})
	}
}
