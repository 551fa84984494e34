// Package fleetgen generates realistic synthetic control repos: many
// clusters with env/region/network labels and per-cluster values, workspaces
// deploying namespaced catalog apps, and cluster-scoped platform components
// chosen by label selectors. Benchmarks and load tests use it to exercise
// fleetbot at fleet scale without a hand-written repo of a thousand files.
package fleetgen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing/fstest"
)

// Options sizes a generated control repo. Zero values pick defaults.
type Options struct {
	// Clusters is the number of clusters (default 10).
	Clusters int
	// Workspaces is the number of workspaces (default Clusters/50, at least 1).
	Workspaces int
	// Apps is the number of catalog apps (default 20); a quarter of them
	// (at least 1) are cluster-scoped platform components.
	Apps int
	// Seed makes the output reproducible: the same options give the same repo.
	Seed int64
}

func (o Options) withDefaults() Options {
	if o.Clusters <= 0 {
		o.Clusters = 10
	}
	if o.Workspaces <= 0 {
		o.Workspaces = max(1, o.Clusters/50)
	}
	if o.Apps <= 0 {
		o.Apps = 20
	}
	return o
}

// name returns the i-th name of list, suffixed once the list runs out.
func name(list []string, i int) string {
	if i < len(list) {
		return list[i]
	}
	return fmt.Sprintf("%s-%d", list[i%len(list)], i/len(list))
}

// prefix turns an app name into a value-name prefix (values are identifiers).
func prefix(app string) string { return strings.ReplaceAll(app, "-", "_") }

// Generate returns a control repo with opts' dimensions as an in-memory FS,
// ready for control.Load.
func Generate(opts Options) fstest.MapFS {
	o := opts.withDefaults()
	envs := []string{"prod", "staging", "dev"}
	regions := []string{"eu", "us", "ap"}
	networks := []string{"metal", "cloud"}
	componentNames := []string{"monitoring", "metallb", "cert-manager", "logging", "ingress", "external-dns", "policy", "backup"}
	appNames := []string{"podinfo", "redis", "api", "web", "worker", "cache", "search", "checkout", "ledger", "notifier",
		"gateway", "auth", "billing", "reports", "scheduler", "uploader", "catalog", "pricing", "inventory", "emails"}
	teamNames := []string{"payments", "search", "checkout", "identity", "data", "growth", "mobile", "risk", "ops", "ads"}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x5eed))
	fs := fstest.MapFS{}
	put := func(p, s string) { fs[p] = &fstest.MapFile{Data: []byte(s), Mode: 0o644} }

	nComp := max(1, o.Apps/4)
	if nComp > o.Apps {
		nComp = o.Apps
	}
	var components, apps []string
	for i := range nComp {
		components = append(components, name(componentNames, i))
	}
	for i := range o.Apps - nComp {
		apps = append(apps, name(appNames, i))
	}

	// Platform: components with a variety of selectors. Component 1 (when
	// present) runs on metal clusters only and requires a per-cluster range.
	var p strings.Builder
	p.WriteString("apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata:\n  name: acme\nspec:\n  owner: acme\n  admins: [platform]\n")
	p.WriteString("  flux:\n    interval: 10m\n  components:\n")
	selectors := []string{
		"{}",
		"\n        matchLabels: {network: metal}",
		"\n        matchExpressions:\n          - {key: env, operator: In, values: [prod, staging]}",
		"\n        matchExpressions:\n          - {key: region, operator: NotIn, values: [ap]}",
		"\n        matchExpressions:\n          - {key: env, operator: Exists}",
	}
	for i, c := range components {
		fmt.Fprintf(&p, "    - app: %s\n      clusterSelector: %s\n", c, selectors[i%len(selectors)])
		if i%2 == 0 {
			fmt.Fprintf(&p, "      values: {%s_log_level: warn}\n", prefix(c))
		}
	}
	put("platform.yaml", p.String())
	for i, c := range components {
		putComponent(put, c, i == 1)
	}
	for i, a := range apps {
		putApp(put, a, i)
	}

	// Workspaces deploy every namespaced app but the odd one out.
	type ws struct {
		name string
		apps []string
	}
	var wss []ws
	for i := range o.Workspaces {
		w := ws{name: name(teamNames, i)}
		skip := -1
		if len(apps) > 2 {
			skip = rng.IntN(len(apps))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: %s\nspec:\n  admins: [%s-devs]\n  apps:\n", w.name, w.name)
		if len(apps) == 0 {
			b.WriteString("    []\n")
		}
		for j, a := range apps {
			if j == skip {
				continue
			}
			w.apps = append(w.apps, a)
			fmt.Fprintf(&b, "    - app: %s\n", a)
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&b, "      values: {%s_replicas: \"%d\"}\n", prefix(a), 2+rng.IntN(3))
			}
		}
		put("workspaces/"+w.name+".yaml", b.String())
		wss = append(wss, w)
	}

	// Clusters: nine in ten join a workspace; metal ones get an address range.
	for i := range o.Clusters {
		env, region, network := envs[rng.IntN(len(envs))], regions[rng.IntN(len(regions))], networks[rng.IntN(len(networks))]
		cn := fmt.Sprintf("%s-%s-%d", env, region, i)
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\n  labels: {env: %s, region: %s, network: %s}\nspec:\n", cn, env, region, network)
		var w *ws
		if i%10 != 9 {
			w = &wss[i%len(wss)]
			fmt.Fprintf(&b, "  workspace: %s\n", w.name)
		}
		fmt.Fprintf(&b, "  admins: [%s-sre]\n", region)
		var values []string
		if network == "metal" && len(components) > 1 {
			values = append(values, fmt.Sprintf("%s_range: 10.%d.%d.0/24", prefix(components[1]), i/256%256, i%256))
		}
		if w != nil && len(w.apps) > 0 && rng.IntN(4) == 0 {
			a := w.apps[rng.IntN(len(w.apps))]
			values = append(values, fmt.Sprintf("%s_replicas: \"%d\"", prefix(a), 1+rng.IntN(5)))
		}
		if len(values) > 0 {
			b.WriteString("  values:\n")
			for _, v := range values {
				b.WriteString("    " + v + "\n")
			}
		}
		put("clusters/"+cn+".yaml", b.String())
	}
	return fs
}

// putComponent writes a cluster-scoped app: its namespace, RBAC and a
// DaemonSet. A ranged component also carries an address pool whose range is
// a required per-cluster value.
func putComponent(put func(p, s string), app string, ranged bool) {
	dir, v := "catalog/"+app+"/", prefix(app)
	var spec strings.Builder
	fmt.Fprintf(&spec, "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata:\n  name: %s\nspec:\n  scope: cluster\n  values:\n", app)
	fmt.Fprintf(&spec, "    %s_log_level: {default: info}\n    %s_image_tag: {default: v1.0.0}\n", v, v)
	resources := "  - namespace.yaml\n  - rbac.yaml\n  - daemonset.yaml\n"
	if ranged {
		fmt.Fprintf(&spec, "    %s_range: {required: true, description: address range announced by this cluster}\n", v)
		resources += "  - pool.yaml\n"
		put(dir+"pool.yaml", fmt.Sprintf("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: default\nspec:\n  addresses:\n    - ${%s_range}\n", v))
	}
	put(dir+"app.yaml", spec.String())
	put(dir+"kustomization.yaml", fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s-system\nlabels:\n  - pairs:\n      app.kubernetes.io/part-of: %s\nresources:\n%s", app, app, resources))
	put(dir+"namespace.yaml", fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s-system\n", app))
	put(dir+"rbac.yaml", fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s
rules:
  - apiGroups: [""]
    resources: [nodes, pods, services]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: %[1]s
subjects:
  - kind: ServiceAccount
    name: %[1]s
    namespace: %[1]s-system
`, app))
	put(dir+"daemonset.yaml", fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %[1]s
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: %[1]s
  template:
    metadata:
      labels:
        app.kubernetes.io/name: %[1]s
    spec:
      serviceAccountName: %[1]s
      tolerations:
        - operator: Exists
      containers:
        - name: agent
          image: registry.acme.io/%[1]s:${%[2]s_image_tag}
          args:
            - --log-level=${%[2]s_log_level}
          resources:
            requests: {cpu: 20m, memory: 32Mi}
`, app, v))
}

// putApp writes a namespaced app: a Deployment, a Service and a ConfigMap
// (with an escaped $${...} for the shell).
func putApp(put func(p, s string), app string, i int) {
	dir, v := "catalog/"+app+"/", prefix(app)
	put(dir+"app.yaml", fmt.Sprintf(`apiVersion: fleetbot.io/v1alpha1
kind: App
metadata:
  name: %[1]s
spec:
  scope: namespaced
  values:
    %[2]s_replicas: {default: "1"}
    %[2]s_image_tag: {default: "1.%[3]d.0"}
    %[2]s_log_level: {default: info}
`, app, v, i))
	put(dir+"kustomization.yaml", fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
labels:
  - pairs:
      app.kubernetes.io/name: %s
    includeSelectors: true
resources:
  - deployment.yaml
  - service.yaml
  - configmap.yaml
`, app))
	put(dir+"deployment.yaml", fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: ${%[2]s_replicas}
  template:
    spec:
      containers:
        - name: %[1]s
          image: registry.acme.io/%[1]s:${%[2]s_image_tag}
          env:
            - name: LOG_LEVEL
              value: "${%[2]s_log_level}"
          ports:
            - name: http
              containerPort: 8080
          volumeMounts:
            - name: config
              mountPath: /etc/%[1]s
      volumes:
        - name: config
          configMap:
            name: %[1]s
`, app, v))
	put(dir+"service.yaml", fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  ports:\n    - name: http\n      port: 80\n      targetPort: http\n", app))
	put(dir+"configmap.yaml", fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  run.sh: |\n    #!/bin/sh\n    exec /app --data=\"$${HOME}/data\"\n", app))
}

// WriteDir writes the repo Generate(opts) returns under dir, for trying the
// CLI on a large fleet.
func WriteDir(dir string, opts Options) error {
	for p, f := range Generate(opts) {
		file := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return fmt.Errorf("writing generated control repo: %w", err)
		}
		if err := os.WriteFile(file, f.Data, 0o644); err != nil {
			return fmt.Errorf("writing generated control repo: %w", err)
		}
	}
	return nil
}
