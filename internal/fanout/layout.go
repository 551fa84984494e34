package fanout

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// Paths of the files fleetbot writes, per DESIGN §3.
const (
	ReadmePath     = "README.md"
	CodeownersPath = ".github/CODEOWNERS"
	FluxPath       = "flux/fleetbot.yaml"
	PlatformDir    = "platform"
	AppsKustomPath = "apps/kustomization.yaml"
	ClustersDir    = "clusters"
)

const managedHeader = "# Managed by fleetbot. Do not edit: changes are overwritten.\n"

// emptyKustomization is the scaffold of a directory people own: valid for
// kustomize and Flux from day one, theirs to fill.
const emptyKustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"

// kustomizationOf lists resources in a managed kustomization.yaml.
func kustomizationOf(header string, resources []string) []byte {
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	if len(resources) == 0 {
		b.WriteString("resources: []\n")
		return []byte(b.String())
	}
	b.WriteString("resources:\n")
	for _, r := range resources {
		b.WriteString("- " + r + "\n")
	}
	return []byte(b.String())
}

// settings are the platform-wide parameters of every target, defaults applied.
type settings struct {
	owner, branch, visibility string
	admins                    []string
	interval                  time.Duration
	secretRef                 string
	// autoMerge is pullRequests.merge: auto: the repos must allow auto-merge.
	autoMerge bool
	// rules are the declared branch rules (nil: none).
	rules *control.BranchRules
}

// settings reads the platform's resolved settings (control.Repo.Fleet) once per Render,
// reporting a bad flux interval instead of writing an object Flux would reject.
func (x *run) settings() settings {
	fl := x.repo.Fleet()
	s := settings{
		owner:      fl.Owner,
		branch:     fl.DefaultBranch,
		visibility: fl.Visibility,
		admins:     fl.Admins,
		secretRef:  fl.FluxSecretRef,
		autoMerge:  fl.AutoMerge,
		rules:      fl.BranchRules,
	}
	d, err := time.ParseDuration(fl.FluxInterval)
	if err != nil || d <= 0 {
		x.addOnce(x.repo.Platform.Source.At("spec.flux.interval"), "use a Go duration such as 10m or 1h",
			"flux interval %q is not a positive duration", fl.FluxInterval)
	}
	s.interval = d
	return s
}

func (x *run) clusterRepo(name string) string { return x.repo.ClusterRepo(name) }

func (x *run) workspaceRepo(name string) string { return x.repo.WorkspaceRepo(name) }

// newTarget starts the Target of a repo of kind: platform-wide settings,
// no managed files yet, and the apps/ scaffold both kinds of repo get.
func (x *run) newTarget(kind Kind, name, repo string, s settings) *Target {
	return &Target{
		Kind: kind, Name: name, Owner: s.owner, Repo: repo,
		DefaultBranch: s.branch, Visibility: s.visibility,
		Files:     map[string][]byte{},
		Scaffolds: map[string][]byte{AppsKustomPath: x.constant(emptyKustomization)},
		Reviewers: append([]string(nil), s.admins...),
	}
}

// constant returns the bytes of text, one slice per distinct text in a Render: every
// target gets the same scaffolds, and a copy per target was 12 MB of a 10,000-cluster
// render (Files and Scaffolds are read-only).
func (x *run) constant(text string) []byte {
	if b, ok := x.constants[text]; ok {
		return b
	}
	b := []byte(text)
	x.constants[text] = b
	return b
}

// fleetbotKustomization returns clusters/<cluster>/fleetbot/kustomization.yaml of a workspace
// repo listing files, one slice per distinct list in a Render (most clusters of a workspace
// run the same apps).
func (x *run) fleetbotKustomization(files []string) []byte {
	key := strings.Join(files, "\n")
	if b, ok := x.fileLists[key]; ok {
		return b
	}
	b := kustomizationOf(managedHeader, files)
	x.fileLists[key] = b
	return b
}

// clusterTarget lays out a cluster repo: platform components (deps, the
// cluster's, by app name as control.Deployer.Components lists them), the Flux
// objects, README and CODEOWNERS, and the apps/ scaffold.
func (x *run) clusterTarget(c *control.Cluster, deps []control.Deployment) *Target {
	s := x.settings()
	name := c.Metadata.Name
	repo := x.clusterRepo(name)
	t := x.newTarget(KindCluster, name, repo, s)
	// One directory per component, each with its kustomization.yaml (applied
	// by the component's own Kustomization), none at platform/ itself.
	var components []component
	selected := map[string]bool{}
	for _, d := range deps {
		if d.Workspace == nil {
			selected[d.App.Metadata.Name] = true
		}
	}
	for _, d := range deps {
		if d.Workspace != nil {
			continue
		}
		app := d.App.Metadata.Name
		for i, dep := range d.App.Spec.DependsOn {
			// control.Load reports this with every cluster concerned;
			// Render stands on its own for repos built otherwise.
			if !selected[dep] {
				x.addOnce(d.App.Source.At(fmt.Sprintf("spec.dependsOn.%d", i)),
					"make "+dep+" a component of this cluster or drop it from spec.dependsOn",
					"component %s depends on %s, which is not a component of cluster %s: Flux would wait forever for Kustomization %s", app, dep, name, componentKustomization(dep))
			}
		}
		dir := PlatformDir + "/" + app + "/"
		file := app + ".yaml"
		if data, ok := x.appFile(d); ok {
			t.Files[dir+file] = data
		}
		t.Files[dir+"kustomization.yaml"] = x.componentKustomization(app)
		components = append(components, component{app: app, dependsOn: d.App.Spec.DependsOn})
	}
	tenancy, err := x.tenancy()
	if err != nil {
		x.addOnce(c.Source.At("metadata.name"), "", "cluster %s: rendering the Flux tenancy policy: %v", name, err)
	}
	t.Files[PlatformDir+"/"+TenancyPolicyFile] = tenancy
	t.Files[PlatformDir+"/"+TenancyDir+"/kustomization.yaml"] = x.componentKustomization(TenancyDir)
	t.Scaffolds[FluxSystemKustomPath] = x.constant(lockdownScaffold)

	ws := x.repo.Workspace(c.Spec.Workspace)
	in := fluxInput{interval: s.interval, cluster: name, branch: s.branch, secretRef: s.secretRef}
	var wsAdmins []string
	if ws != nil {
		in.workspace, in.namespace, in.podSecurity = ws.Metadata.Name, ws.Namespace(), ws.PodSecurityLevel()
		in.repoURL = x.r.gitURL + "/" + s.owner + "/" + x.workspaceRepo(ws.Metadata.Name)
		in.wait = x.repo.HasRollout() && x.repo.HealthDelivery().Provider == control.HealthGenericHMAC
		wsAdmins = ws.Spec.Admins
	}
	flux, err := x.flux(in, components)
	if err != nil {
		x.addOnce(c.Source.At("metadata.name"), "", "cluster %s: rendering Flux objects: %v", name, err)
	}
	if x.repo.HasRollout() {
		// Rollout waves are gated on Flux's health: commit statuses, or events to serve.
		health, err := x.health(name, in, x.r.gitURL+"/"+s.owner+"/"+repo)
		if err != nil {
			x.addOnce(c.Source.At("metadata.name"), "", "cluster %s: rendering the health reporting objects: %v", name, err)
		}
		flux = append(append(flux, "---\n"...), health...)
	}
	t.Files[FluxPath] = flux
	t.Files[CodeownersPath] = policy.CODEOWNERS(s.owner, []policy.Rule{
		{Pattern: "*", Teams: s.admins},
		{Pattern: "/apps/", Teams: c.Spec.Admins},
		{Pattern: "/" + FluxSystemKustomPath, Teams: c.Spec.Admins},
	})
	// Written into the run's scratch buffer and copied out at its size: growing a builder per
	// cluster was four times the README's bytes in garbage.
	x.scratch.Reset()
	clusterReadme(&x.scratch, s, c, repo, components, in, x.workspaceRepo)
	x.scratch.Write(x.provisionedNote(c))
	t.Files[ReadmePath] = bytes.Clone(x.scratch.Bytes())
	t.Access = policy.ClusterRepoAccess(s.admins, c.Spec.Admins, wsAdmins, s.branch)
	withBranchRules(&t.Access, s.rules, KindCluster, name)
	// A rollout wave may set its own merge mode (spec.rollout.waves[].merge).
	t.Access.AllowAutoMerge = s.autoMerge || x.repo.ClusterAutoMerge(name)
	return t
}

// componentKustomization returns platform/<dir>/kustomization.yaml through
// the run's memo: it lists the one file of the directory, the same on every
// cluster (<app>.yaml, or the tenancy policy's file).
func (x *run) componentKustomization(dir string) []byte {
	if b, ok := x.componentKustomizations[dir]; ok {
		return b
	}
	file := dir + ".yaml"
	if dir == TenancyDir {
		file = path.Base(TenancyPolicyFile)
	}
	b := kustomizationOf(managedHeader, []string{file})
	x.componentKustomizations[dir] = b
	return b
}

// workspaceTarget lays out a workspace repo: per cluster of the workspace
// (members, in name order), the rendered apps under clusters/<cluster>/fleetbot/
// and the scaffolds the workspace admins own.
func (x *run) workspaceTarget(w *control.Workspace, members []*control.Cluster, dp *control.Deployer) *Target {
	s := x.settings()
	name := w.Metadata.Name
	repo := x.workspaceRepo(name)
	t := x.newTarget(KindWorkspace, name, repo, s)
	var clusters []string
	for _, c := range members {
		cn := c.Metadata.Name
		clusters = append(clusters, cn)
		dir := ClustersDir + "/" + cn
		var files []string
		for _, d := range dp.WorkspaceApps(c) {
			if d.Workspace == nil || d.Workspace.Metadata.Name != name {
				continue
			}
			file := d.App.Metadata.Name + ".yaml"
			if data, ok := x.appFile(d); ok {
				t.Files[dir+"/fleetbot/"+file] = data
			}
			files = append(files, file)
		}
		t.Files[dir+"/fleetbot/kustomization.yaml"] = x.fleetbotKustomization(files)
		t.Scaffolds[dir+"/kustomization.yaml"] = x.constant("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- fleetbot\n- ../../apps\n")
	}
	t.Files[CodeownersPath] = policy.CODEOWNERS(s.owner, []policy.Rule{
		{Pattern: "*", Teams: s.admins},
		{Pattern: "/apps/", Teams: w.Spec.Admins},
		{Pattern: "/clusters/*/kustomization.yaml", Teams: w.Spec.Admins},
	})
	t.Files[ReadmePath] = workspaceReadme(s, w, repo, clusters, x.clusterRepo)
	t.Access = policy.WorkspaceRepoAccess(s.admins, w.Spec.Admins, s.branch)
	withBranchRules(&t.Access, s.rules, KindWorkspace, name)
	t.Access.AllowAutoMerge = s.autoMerge
	return t
}

// teams renders team slugs as GitHub mentions, or fallback when there are none.
func teams(owner string, slugs []string, fallback string) string {
	if len(slugs) == 0 {
		return fallback
	}
	out := make([]string, len(slugs))
	for i, s := range slugs {
		out[i] = "@" + owner + "/" + s
	}
	return strings.Join(out, ", ")
}

func labelsText(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "`" + k + "=" + labels[k] + "`"
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

const readmeHeader = "<!-- Managed by fleetbot. Do not edit: changes are overwritten. -->\n"

func clusterReadme(b *bytes.Buffer, s settings, c *control.Cluster, repo string, components []component, in fluxInput, workspaceRepo func(string) string) {
	name := c.Metadata.Name
	platform := teams(s.owner, s.admins, "platform admins")
	clusterAdmins := teams(s.owner, c.Spec.Admins, "platform admins (the cluster has no admin team)")
	b.WriteString(readmeHeader)
	fmt.Fprintf(b, "# %s\n\n", repo)
	fmt.Fprintf(b, "The GitOps repo of cluster **%s** (labels: %s). Flux on the cluster applies what lands on `%s`.\n", name, labelsText(c.Metadata.Labels), s.branch)
	b.WriteString("fleetbot writes the managed files from the platform's control repo and proposes every change as a pull request.\n\n")
	b.WriteString("## Who owns what\n\n")
	b.WriteString("| path | owner | notes |\n|---|---|---|\n")
	fmt.Fprintf(b, "| `README.md`, `.github/CODEOWNERS`, `flux/fleetbot.yaml`, `platform/` | %s | managed by fleetbot: change the control repo instead |\n", platform)
	fmt.Fprintf(b, "| `apps/` | %s | cluster admins' own workloads; fleetbot created `apps/kustomization.yaml` once and never changes it |\n", clusterAdmins)
	fmt.Fprintf(b, "| `flux/flux-system/kustomization.yaml` | %s | Flux's own kustomization: fleetbot created it once with the multi-tenancy lockdown (below) and never changes it; `flux bootstrap` keeps it |\n", clusterAdmins)
	b.WriteString("| `flux/flux-system/` (the rest) | Flux | written by `flux bootstrap`; fleetbot never touches it |\n\n")
	fmt.Fprintf(b, "Changes reach `%s` by pull request only, and CODEOWNERS requires the owners' review.\n\n", s.branch)

	b.WriteString("## Platform components\n\n")
	if len(components) == 0 {
		b.WriteString("None: no platform component selects this cluster.\n\n")
	} else {
		b.WriteString("Each component has its directory and its Flux Kustomization, so a component that fails blocks only the components that depend on it:\n\n")
		b.WriteString("| component | directory | Kustomization | after |\n|---|---|---|---|\n")
		for _, cp := range components {
			after := "-"
			if len(cp.dependsOn) > 0 {
				deps := make([]string, len(cp.dependsOn))
				for i, d := range cp.dependsOn {
					deps[i] = "`" + componentKustomization(d) + "`"
				}
				after = strings.Join(deps, ", ")
			}
			fmt.Fprintf(b, "| %s | `platform/%s/` | `%s` | %s |\n", cp.app, cp.app, componentKustomization(cp.app), after)
		}
		b.WriteString("\n")
	}

	b.WriteString("## Bootstrap Flux\n\n")
	b.WriteString("Run once against the cluster (add `--personal` when the owner is a user, not an organisation):\n\n")
	fmt.Fprintf(b, "```sh\nflux bootstrap github --owner=%s --repository=%s --branch=%s --path=flux\n```\n\n", s.owner, repo, s.branch)
	b.WriteString("Flux then applies `flux/fleetbot.yaml`: one Kustomization `platform-<component>` per component (path `./platform/<component>`), `fleetbot-tenancy` (path `./platform/" + TenancyDir + "`) and `apps` (path `./apps`). ")
	b.WriteString("`apps` waits for no component: until what it uses exists (a component's CRDs), it fails and is retried every interval.\n")

	b.WriteString("\n## Multi-tenancy lockdown\n\n")
	b.WriteString("`flux/flux-system/kustomization.yaml` patches the Flux controllers as the Flux documentation's multi-tenancy lockdown does: `--no-cross-namespace-refs=true` (kustomize-, helm-, notification- and the image controllers), `--no-remote-bases=true` (kustomize-controller) and `--default-service-account=default` (kustomize- and helm-controller), and runs the `flux-system` Kustomization as `kustomize-controller`. ")
	b.WriteString("A Kustomization or HelmRelease that names no ServiceAccount then runs with the rights of its namespace's `default` ServiceAccount instead of Flux's own cluster-wide ones.\n\n")
	fmt.Fprintf(b, "`platform/%s` adds a ValidatingAdmissionPolicy (Kubernetes 1.30 or later) that denies, in every namespace labelled `%s`, a Flux Kustomization or HelmRelease that does not impersonate the workspace's ServiceAccount, has `spec.kubeConfig` or references another namespace, even where the lockdown flags were removed.\n", TenancyPolicyFile, WorkspaceLabel)

	if in.workspace != "" {
		b.WriteString("\n## Workspace\n\n")
		fmt.Fprintf(b, "This cluster belongs to workspace **%s**. Flux reconciles `clusters/%s` of `%s/%s` into namespace `%s`, impersonating the ServiceAccount `%s` (ClusterRole `admin` in that namespace only).\n\n",
			in.workspace, name, s.owner, workspaceRepo(in.workspace), in.namespace, in.workspace)
		if in.secretRef == "" {
			fmt.Fprintf(b, "Its GitRepository reads the workspace repo `%s` without credentials (the platform's `flux.secretRef` is empty): the repo must be readable anonymously from the cluster.\n", in.repoURL)
		} else {
			fmt.Fprintf(b, "Its GitRepository reads the workspace repo with the secret `%s` in namespace `%s`; create it once after bootstrap, with a read-only token:\n\n", in.secretRef, in.namespace)
			fmt.Fprintf(b, "```sh\nkubectl create namespace %s --dry-run=client -o yaml | kubectl apply -f -\n", in.namespace)
			fmt.Fprintf(b, "flux create secret git %s --namespace=%s --url=%s --username=git --password=\"$GITHUB_TOKEN\"\n```\n", in.secretRef, in.namespace, in.repoURL)
		}
	}
}

func workspaceReadme(s settings, w *control.Workspace, repo string, clusters []string, clusterRepo func(string) string) []byte {
	var b strings.Builder
	name := w.Metadata.Name
	ns := w.Namespace()
	platform := teams(s.owner, s.admins, "platform admins")
	wsAdmins := teams(s.owner, w.Spec.Admins, "platform admins (the workspace has no admin team)")
	b.WriteString(readmeHeader)
	fmt.Fprintf(&b, "# %s\n\n", repo)
	fmt.Fprintf(&b, "The GitOps repo of workspace **%s**. On every cluster of the workspace, Flux applies `clusters/<cluster>` from `%s` into namespace `%s`, with the rights of the ServiceAccount `%s` in that namespace only.\n\n", name, s.branch, ns, name)
	b.WriteString("## Who owns what\n\n")
	b.WriteString("| path | owner | notes |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| `README.md`, `.github/CODEOWNERS`, `clusters/*/fleetbot/` | %s | managed by fleetbot: catalog apps rendered per cluster; change the control repo instead |\n", platform)
	fmt.Fprintf(&b, "| `apps/` | %s | the workspace's own manifests, applied on every cluster |\n", wsAdmins)
	fmt.Fprintf(&b, "| `clusters/*/kustomization.yaml` | %s | per-cluster entry point (`fleetbot` + `../../apps`); add overlays here |\n\n", wsAdmins)
	fmt.Fprintf(&b, "fleetbot created the `apps/` and `clusters/*/kustomization.yaml` scaffolds once and never changes them. Changes reach `%s` by pull request only, and CODEOWNERS requires the owners' review. Objects are confined to namespace `%s`: cluster-scoped objects are refused.\n\n", s.branch, ns)
	fmt.Fprintf(&b, "A Flux Kustomization or HelmRelease of this repo must set `spec.serviceAccountName: %s` and may not set `spec.kubeConfig` or name another namespace (`sourceRef`, `chartRef`, `dependsOn`, `targetNamespace`, ...): `%s` refuses them here, and the cluster's admission policy denies them there.\n\n", name, checkWorkspaceCommand(name, ns))
	b.WriteString("## Clusters\n\n")
	if len(clusters) == 0 {
		b.WriteString("None yet: no cluster is in this workspace.\n")
	}
	for _, c := range clusters {
		fmt.Fprintf(&b, "- `%s` (repo `%s/%s`)\n", c, s.owner, clusterRepo(c))
	}
	return []byte(b.String())
}

// checkWorkspaceCommand is the check workspace command line for workspace
// name confined to namespace ns.
func checkWorkspaceCommand(name, ns string) string {
	cmd := "fleetbot check workspace --dir . --workspace " + name
	if ns != name {
		cmd += " --namespace " + ns
	}
	return cmd
}

// ComponentOfPath returns the platform component whose directory (platform/<app>/) holds path
// in a cluster repo; the tenancy policy's directory is no component.
func ComponentOfPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, PlatformDir+"/")
	if !ok {
		return "", false
	}
	app, _, ok := strings.Cut(rest, "/")
	if !ok || app == TenancyDir {
		return "", false
	}
	return app, true
}
