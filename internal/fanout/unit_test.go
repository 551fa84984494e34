package fanout

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

func TestCompileAndApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want  string
		refs, bad []string
	}{
		{in: "plain: text\n", want: "plain: text\n"},
		{in: "a: ${x}\nb: ${y_2}\nc: ${x}\n", want: "a: X\nb: \nc: X\n", refs: []string{"x", "y_2", "x"}},
		{in: "sh: cd $${HOME} && echo $$ $PATH $", want: "sh: cd ${HOME} && echo $$ $PATH $"},
		{in: "a: $${x} ${x}", want: "a: ${x} X", refs: []string{"x"}},
		{in: "a: ${x:=1} ${1x} ${}", want: "a: ${x:=1} ${1x} ${}", bad: []string{"${x:=1}", "${1x}", "${}"}},
		{in: "a: ${open\nb: 1\n", want: "a: ${open\nb: 1\n", bad: []string{"${open"}},
	}
	for _, tc := range tests {
		tmpl, refs, bad := compile(tc.in)
		var b strings.Builder
		tmpl.apply(&b, map[string]string{"x": "X"})
		assert.Equal(t, tc.want, b.String(), "input %q", tc.in)
		assert.Equal(t, tc.refs, refs, "refs of %q", tc.in)
		assert.Equal(t, tc.bad, bad, "bad refs of %q", tc.in)
		assert.Equal(t, len(tc.refs) > 0, tmpl.vars, "vars of %q", tc.in)
	}
}

func TestPrecheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  []string // substrings of problems, in order; none = clean
	}{{
		name:  "clean with overlay, generators and patches",
		files: map[string]string{"kustomization.yaml": "resources: [base, extra.yaml]\npatches:\n  - path: patch.yaml\nconfigMapGenerator:\n  - name: c\n    files: [conf=files/c.conf]\ntransformers:\n  - |\n    apiVersion: builtin\n    kind: LabelTransformer\n    metadata: {name: l}\n    labels: {a: b}\n    fieldSpecs: [{path: metadata/labels, create: true}]\n", "base/kustomization.yaml": "resources: [d.yaml]\n", "base/d.yaml": "", "extra.yaml": "", "patch.yaml": "", "files/c.conf": ""},
	}, {
		name:  "no root kustomization",
		files: map[string]string{"base/kustomization.yaml": "resources: []\n"},
		want:  []string{"no kustomization.yaml"},
	}, {
		name:  "escapes in every path field",
		files: map[string]string{"kustomization.yaml": "patches:\n  - path: ../p.yaml\nconfigMapGenerator:\n  - name: c\n    files: [k=../../etc/passwd]\n    envs: [/etc/env]\ncomponents: [../c]\n"},
		want:  []string{`"../p.yaml" escapes`, `"../../etc/passwd" escapes`, `"/etc/env" is an absolute path`, `"../c" escapes`},
	}, {
		name:  "remote everywhere",
		files: map[string]string{"kustomization.yaml": "bases: [git@github.com:a/b]\npatchesStrategicMerge: [https://x/p.yaml]\nopenapi:\n  path: https://x/schema.json\n"},
		want:  []string{"git@github.com:a/b", "https://x/p.yaml", "https://x/schema.json"},
	}, {
		name:  "nested kustomization is checked too",
		files: map[string]string{"kustomization.yaml": "resources: [base]\n", "base/kustomization.yaml": "resources: [../../other]\nhelmChartInflationGenerator: []\n"},
		want:  []string{`"../../other" escapes`, "helmChartInflationGenerator"},
	}, {
		name:  "inline exec plugin",
		files: map[string]string{"kustomization.yaml": "generators:\n  - |\n    apiVersion: acme.io/v1\n    kind: Gen\n    metadata: {name: g}\n"},
		want:  []string{`generators entry Gen (apiVersion "acme.io/v1") is not a built-in`},
	}, {
		name:  "invalid YAML",
		files: map[string]string{"kustomization.yaml": "resources: [a\n"},
		want:  []string{"not valid YAML"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{}
			for p, s := range tc.files {
				files[p] = []byte(s)
			}
			probs := precheck(files)
			var got []string
			for _, p := range probs {
				got = append(got, p.File+": "+p.Message)
			}
			if !assert.Len(t, probs, len(tc.want), "problems: %q", got) {
				return
			}
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
				assert.NotEmpty(t, probs[i].Hint, "every problem has a hint: %s", got[i])
			}
		})
	}
}

func TestClusterScoped(t *testing.T) {
	t.Parallel()
	for _, k := range [][2]string{{"v1", "Namespace"}, {"rbac.authorization.k8s.io/v1", "ClusterRole"}, {"apiextensions.k8s.io/v1", "CustomResourceDefinition"}, {"storage.k8s.io/v1", "StorageClass"}, {"scheduling.k8s.io/v1", "PriorityClass"}, {"cert-manager.io/v1", "ClusterIssuer"}} {
		assert.True(t, clusterScoped(k[0], k[1]), "%v", k)
	}
	for _, k := range [][2]string{{"v1", "ConfigMap"}, {"apps/v1", "Deployment"}, {"rbac.authorization.k8s.io/v1", "RoleBinding"}, {"metallb.io/v1beta1", "IPAddressPool"}} {
		assert.False(t, clusterScoped(k[0], k[1]), "%v", k)
	}
}

func TestTombstone(t *testing.T) {
	t.Parallel()
	tg := Tombstone("acme", []string{"platform"}, "main", KindWorkspace, "payments", "workspace-payments")
	assert.True(t, tg.Removed)
	assert.Equal(t, []string{".github/CODEOWNERS", "README.md"}, slices.Sorted(maps.Keys(tg.Files)))
	assert.Equal(t, string(policy.CODEOWNERS("acme", []policy.Rule{{Pattern: "*", Teams: []string{"platform"}}})), string(tg.Files[CodeownersPath]))
	assert.Contains(t, string(tg.Files[ReadmePath]), "**payments** was removed")
	assert.Contains(t, string(tg.Files[ReadmePath]), "`clusters/*/fleetbot/`")
	for p := range tg.Files {
		assert.True(t, KindWorkspace.Managed(p), p)
	}
}
