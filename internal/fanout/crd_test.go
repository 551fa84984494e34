package fanout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

const crdDir = "../../testdata/crds"

// crdSchemas compiles, from the pinned CRDs in testdata/crds, one JSON
// Schema per apiVersion/kind: the version's openAPIV3Schema, made strict
// (an object with declared properties and no x-kubernetes-preserve-unknown-fields
// accepts no other field, as the API server's pruning would drop them).
func crdSchemas(t *testing.T) map[string]*sjs.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	c := sjs.NewCompiler()
	out := map[string]*sjs.Schema{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var crd apiextensionsv1.CustomResourceDefinition
		require.NoError(t, sigsyaml.UnmarshalStrict(data, &crd), f)
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			require.NoError(t, err)
			var doc any
			require.NoError(t, json.Unmarshal(raw, &doc))
			strict(doc)
			key := crd.Spec.Group + "/" + v.Name + "/" + crd.Spec.Names.Kind
			url := "file:///crds/" + strings.ReplaceAll(key, "/", "_") + ".json"
			require.NoError(t, c.AddResource(url, doc), key)
			s, err := c.Compile(url)
			require.NoError(t, err, key)
			out[key] = s
		}
	}
	return out
}

func strict(n any) {
	m, ok := n.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for _, p := range props {
			strict(p)
		}
		if _, has := m["additionalProperties"]; !has && m["x-kubernetes-preserve-unknown-fields"] != true {
			m["additionalProperties"] = false
		}
	}
	if items, ok := m["items"]; ok {
		strict(items)
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		strict(ap)
	}
}

// documents splits a rendered file into its objects.
func documents(t *testing.T, name string, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err, name)
		if m != nil {
			out = append(out, m)
		}
	}
}

// TestManagementObjectsMatchCRDSchemas validates every object of every
// rendered management repo against the openAPIV3Schema of its pinned CRD,
// and decodes it strictly as its Flux (or core) Go API type.
func TestManagementObjectsMatchCRDSchemas(t *testing.T) {
	schemas := crdSchemas(t)
	seen := map[string]int{}
	for _, tg := range renderProvisionExample(t) {
		if tg.Kind != KindManagement {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(tg.Files)) {
			if !strings.HasSuffix(p, ".yaml") || p == ProvisionDir+"/kustomization.yaml" {
				continue
			}
			where := tg.Repo + "/" + p
			data := tg.Files[p]
			for i, obj := range documents(t, where, data) {
				api, _ := obj["apiVersion"].(string)
				kind, _ := obj["kind"].(string)
				at := fmt.Sprintf("%s document %d (%s %s)", where, i+1, api, kind)
				one, err := sigsyaml.Marshal(obj)
				require.NoError(t, err)
				var typed any
				switch kind {
				case helmv2.HelmReleaseKind:
					typed = &helmv2.HelmRelease{}
				case sourcev1.GitRepositoryKind:
					typed = &sourcev1.GitRepository{}
				case sourcev1.HelmRepositoryKind:
					typed = &sourcev1.HelmRepository{}
				case sourcev1.OCIRepositoryKind:
					typed = &sourcev1.OCIRepository{}
				case kustomizev1.KustomizationKind:
					typed = &kustomizev1.Kustomization{}
				case "Namespace":
					typed = &corev1.Namespace{}
				default:
					t.Errorf("%s: unexpected kind", at)
					continue
				}
				require.NoError(t, sigsyaml.UnmarshalStrict(one, typed), "%s decodes strictly as %T", at, typed)
				seen[kind]++
				if kind == "Namespace" {
					continue
				}
				s, ok := schemas[api+"/"+kind]
				require.True(t, ok, "%s: no pinned CRD serves %s %s", at, api, kind)
				// Validate the JSON form, as the API server sees it.
				raw, err := json.Marshal(obj)
				require.NoError(t, err)
				inst, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
				require.NoError(t, err)
				if err := s.Validate(inst); err != nil {
					t.Errorf("%s does not match its CRD schema: %v", at, err)
				}
			}
		}
	}
	for _, k := range []string{"HelmRelease", "GitRepository", "HelmRepository", "OCIRepository", "Kustomization", "Namespace"} {
		require.NotZero(t, seen[k], "the example renders at least one %s", k)
	}
}

// TestCRDSchemasCatchMistakes proves the schema check is not vacuous: an
// unknown field and a wrong type are refused.
func TestCRDSchemasCatchMistakes(t *testing.T) {
	schemas := crdSchemas(t)
	s := schemas["helm.toolkit.fluxcd.io/v2/HelmRelease"]
	require.NotNil(t, s)
	for name, doc := range map[string]string{
		"unknown spec field": `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"x"},"spec":{"interval":"10m","chartt":{}}}`,
		"wrong type":         `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"x"},"spec":{"interval":"10m","suspend":"yes"}}`,
		"missing interval":   `{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease","metadata":{"name":"x"},"spec":{}}`,
	} {
		inst, err := sjs.UnmarshalJSON(strings.NewReader(doc))
		require.NoError(t, err)
		require.Error(t, s.Validate(inst), name)
	}
}
