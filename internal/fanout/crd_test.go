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
	"strconv"
	"strings"
	"sync"
	"testing"
	gotemplate "text/template"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

const crdDir = "../../testdata/crds"

// crdFiles are the pinned CRDs: Flux's in testdata/crds, Cluster API's in
// testdata/crds/cluster-api.
var crdFiles = []string{"*.yaml", "cluster-api/*.yaml"}

// crdSchemas compiles, from the pinned CRDs (crdFiles), one JSON
// Schema per apiVersion/kind: the version's openAPIV3Schema, made strict
// (an object with declared properties and no x-kubernetes-preserve-unknown-fields
// accepts no other field, as the API server's pruning would drop them).
func crdSchemas(t *testing.T) map[string]*sjs.Schema {
	t.Helper()
	schemas, err := compiledCRDSchemas()
	require.NoError(t, err)
	return schemas
}

// compiledCRDSchemas compiles the pinned CRDs once for the package's tests (a compiled
// schema is read-only: validating with it from parallel tests is safe).
var compiledCRDSchemas = sync.OnceValues(func() (map[string]*sjs.Schema, error) {
	var files []string
	for _, pattern := range crdFiles {
		matched, err := filepath.Glob(filepath.Join(crdDir, pattern))
		if err != nil {
			return nil, err
		}
		if len(matched) == 0 {
			return nil, fmt.Errorf("no pinned CRD matches %s/%s", crdDir, pattern)
		}
		files = append(files, matched...)
	}
	c := sjs.NewCompiler()
	out := map[string]*sjs.Schema{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			var doc any
			if err := json.Unmarshal(raw, &doc); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			strict(doc)
			key := crd.Spec.Group + "/" + v.Name + "/" + crd.Spec.Names.Kind
			url := "file:///crds/" + strings.ReplaceAll(key, "/", "_") + ".json"
			if err := c.AddResource(url, doc); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f, key, err)
			}
			s, err := c.Compile(url)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f, key, err)
			}
			out[key] = s
		}
	}
	return out, nil
})

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
// rendered management repo (of the example, and of the example with rollout
// waves, which adds the hub health Provider and Alert) against the
// openAPIV3Schema of its pinned CRD, and decodes it strictly as its Flux (or
// core) Go API type where go.mod has one.
func TestManagementObjectsMatchCRDSchemas(t *testing.T) {
	t.Parallel()
	schemas := crdSchemas(t)
	seen := map[string]int{}
	for _, tg := range append(renderProvisionExample(t), renderProvisionExampleWithWaves(t)...) {
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
				case notificationv1beta3.ProviderKind:
					typed = &notificationv1beta3.Provider{}
				case notificationv1beta3.AlertKind:
					typed = &notificationv1beta3.Alert{}
				default:
					t.Errorf("%s: unexpected kind", at)
					continue
				}
				if typed != nil {
					require.NoError(t, sigsyaml.UnmarshalStrict(one, typed), "%s decodes strictly as %T", at, typed)
				}
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
	for _, k := range []string{"HelmRelease", "GitRepository", "HelmRepository", "OCIRepository", "Kustomization", "Namespace", "Provider", "Alert"} {
		require.NotZero(t, seen[k], "the example renders at least one %s", k)
	}
}

// TestCRDSchemasCatchMistakes proves the schema check is not vacuous: an
// unknown field, a wrong type and a missing or malformed required field are
// refused, by Flux's CRDs and by Cluster API's.
func TestCRDSchemasCatchMistakes(t *testing.T) {
	t.Parallel()
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
	capi := schemas["cluster.x-k8s.io/v1beta2/Cluster"]
	require.NotNil(t, capi, "the pinned Cluster API CRD serves cluster.x-k8s.io/v1beta2 Cluster")
	cluster := func(md string) string {
		return `{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","metadata":{"name":"x"},"spec":{"topology":{"classRef":{"name":"tiny"},"version":"v1.35.4","workers":{"machineDeployments":[` + md + `]}}}}`
	}
	ok, err := sjs.UnmarshalJSON(strings.NewReader(cluster(`{"class":"default-worker","name":"workers","replicas":3}`)))
	require.NoError(t, err)
	require.NoError(t, capi.Validate(ok), "a valid Cluster")
	for name, doc := range map[string]string{
		"replicas as a string":   cluster(`{"class":"default-worker","name":"workers","replicas":"3"}`),
		"node pool name case":    cluster(`{"class":"default-worker","name":"Workers","replicas":3}`),
		"node pool without name": cluster(`{"class":"default-worker","replicas":3}`),
		"unknown field":          cluster(`{"class":"default-worker","name":"workers","count":3}`),
	} {
		inst, err := sjs.UnmarshalJSON(strings.NewReader(doc))
		require.NoError(t, err)
		require.Error(t, capi.Validate(inst), name)
	}
}

// provisionChart is the test provisioning chart the end-to-end tests install
// with a real helm-controller (testdata/provision/chart/README.md).
const provisionChart = "../../testdata/provision/chart/capi-tiny"

// renderChart renders every template of the chart in dir, as helm template
// does for release in namespace with values: Go templates with Helm's
// quote, the only function the test chart uses; a missing value is an error
// (Helm would render it empty).
func renderChart(t *testing.T, dir, release, namespace string, values map[string]any) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "templates of %s", dir)
	funcs := gotemplate.FuncMap{"quote": func(v any) string { return strconv.Quote(fmt.Sprint(v)) }}
	var out bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		tpl, err := gotemplate.New(filepath.Base(f)).Funcs(funcs).Option("missingkey=error").Parse(string(data))
		require.NoError(t, err, f)
		out.WriteString("---\n")
		require.NoError(t, tpl.Execute(&out, map[string]any{
			"Values":  values,
			"Release": map[string]any{"Name": release, "Namespace": namespace},
		}), "rendering %s with the values of release %s", f, release)
	}
	return out.Bytes()
}

// TestProvisionChartMatchesClusterAPISchema renders the test provisioning
// chart (the one the end-to-end tests install with a real helm-controller)
// with the values of every HelmRelease fleetbot renders into the example's
// management repos, and validates the Cluster API objects it creates against
// the pinned Cluster API CRD: the values fleetbot writes (names, versions,
// node pool counts as integers) make objects the API server accepts.
func TestProvisionChartMatchesClusterAPISchema(t *testing.T) {
	t.Parallel()
	schemas := crdSchemas(t)
	clusters := 0
	for _, tg := range renderProvisionExample(t) {
		if tg.Kind != KindManagement {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(tg.Files)) {
			if !strings.HasPrefix(p, ProvisionClustersDir+"/") {
				continue
			}
			for _, hr := range documents(t, tg.Repo+"/"+p, tg.Files[p]) {
				if hr["kind"] != helmv2.HelmReleaseKind {
					continue
				}
				name, _ := valueAt(hr, "metadata", "name").(string)
				ns, _ := valueAt(hr, "metadata", "namespace").(string)
				values, _ := valueAt(hr, "spec", "values").(map[string]any)
				require.NotNil(t, values, "%s/%s: HelmRelease %s has values", tg.Repo, p, name)
				where := fmt.Sprintf("chart capi-tiny with the values of %s/%s (HelmRelease %s)", tg.Repo, p, name)
				for i, obj := range documents(t, where, renderChart(t, provisionChart, name, ns, values)) {
					api, _ := obj["apiVersion"].(string)
					kind, _ := obj["kind"].(string)
					at := fmt.Sprintf("%s, document %d (%s %s)", where, i+1, api, kind)
					s, ok := schemas[api+"/"+kind]
					require.True(t, ok, "%s: no pinned CRD serves %s %s", at, api, kind)
					raw, err := json.Marshal(obj)
					require.NoError(t, err)
					inst, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
					require.NoError(t, err)
					if err := s.Validate(inst); err != nil {
						t.Errorf("%s does not match the Cluster API CRD schema: %v", at, err)
					}
					if kind == "Cluster" {
						clusters++
						assert.Equal(t, name, valueAt(obj, "metadata", "name"), at)
						assert.Equal(t, values["kubernetesVersion"], valueAt(obj, "spec", "topology", "version"), at)
					}
				}
			}
		}
	}
	require.GreaterOrEqual(t, clusters, 2, "the example provisions at least two clusters")
}

// valueAt is the value at path in a decoded object, or nil.
func valueAt(obj map[string]any, path ...string) any {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestClusterFluxObjectsMatchCRDSchemas validates every Flux object of every
// cluster repo's flux/fleetbot.yaml, rendered from the example with a
// rollout wave (so with the health Provider and Alert), against the
// openAPIV3Schema of its pinned CRD; the core objects beside them
// (Namespace, ServiceAccount, RoleBinding) have no CRD.
func TestClusterFluxObjectsMatchCRDSchemas(t *testing.T) {
	t.Parallel()
	schemas := crdSchemas(t)
	repo := loadExample(t)
	repo.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
	seen := map[string]int{}
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindCluster {
			continue
		}
		where := tg.Repo + "/" + FluxPath
		for i, obj := range documents(t, where, tg.Files[FluxPath]) {
			api, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			at := fmt.Sprintf("%s document %d (%s %s)", where, i+1, api, kind)
			if !strings.Contains(api, ".toolkit.fluxcd.io/") {
				continue
			}
			s, ok := schemas[api+"/"+kind]
			require.True(t, ok, "%s: no pinned CRD serves %s %s", at, api, kind)
			raw, err := json.Marshal(obj)
			require.NoError(t, err)
			inst, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
			require.NoError(t, err)
			if err := s.Validate(inst); err != nil {
				t.Errorf("%s does not match its CRD schema: %v", at, err)
			}
			seen[kind]++
		}
	}
	for _, k := range []string{"Kustomization", "GitRepository", "Provider", "Alert"} {
		require.NotZero(t, seen[k], "the example's cluster repos render at least one %s", k)
	}
}
