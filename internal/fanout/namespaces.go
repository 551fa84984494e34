package fanout

import (
	"fmt"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// nsClaim is one definition that claims a namespace: who, and where it is written.
type nsClaim struct {
	who string
	pos control.Position
}

func (c nsClaim) String() string {
	if c.pos.File == "" {
		return c.who
	}
	return c.who + " (" + c.pos.String() + ")"
}

// namespaceOwners refuses a namespace with two owners once the platform components' apps are
// built, since only then are their namespaces known. A component owns the namespaces whose
// Namespace object it renders, and uses those its namespaced objects are in: its Kustomization
// applies them (and prunes them when the component goes). Each namespace has one owner among
// the system (default, flux-system, kube-*), fleetbot itself (its deployment's namespace, a
// management cluster's provisioning namespace), one component and one workspace:
//
//   - a component may not render the Namespace of the system or of fleetbot, nor one another
//     component renders (two Kustomizations would own it, and removing either component would
//     prune it with everything in it);
//   - a component may not put objects in fleetbot's namespaces or in a workspace's, and a
//     workspace may not take a namespace a component renders or uses (the workspace is admin
//     there, beside the component's ServiceAccounts and Secrets).
//
// A component may put objects in a system namespace (kube-system, ...) or in another
// component's namespace without owning it; it never labels a namespace it does not render.
// control.Load has already refused a workspace namespace of the system, of fleetbot or of
// another workspace. Every issue names both definitions.
func (x *run) namespaceOwners() {
	p := x.repo.Platform
	if p == nil {
		return
	}
	fleetbot := map[string]nsClaim{control.FleetbotNamespace: {who: "fleetbot's own deployment (deploy/base/kustomization.yaml)"}}
	for i, m := range p.Spec.ManagementClusters {
		fleetbot[m.ProvisionNamespace()] = nsClaim{who: "the provisioning namespace of management cluster " + m.Name,
			pos: p.Source.At(fmt.Sprintf("spec.managementClusters.%d", i))}
	}
	workspaces := map[string]nsClaim{}
	for _, w := range x.repo.Workspaces {
		pos := w.Source.At("metadata.name")
		if w.Spec.Namespace != "" {
			pos = w.Source.At("spec.namespace")
		}
		workspaces[w.Namespace()] = nsClaim{who: "workspace " + w.Metadata.Name, pos: pos}
	}
	owned := map[string]func() nsClaim{}
	for _, comp := range p.Spec.Components {
		app := x.repo.App(comp.App)
		b := x.builds[comp.App]
		if app == nil || b == nil || len(b.problems) > 0 {
			continue
		}
		what := "platform component " + comp.App
		used := map[string]bool{}
		for _, o := range b.objects {
			// The position of a claim is looked up only when it collides: it parses the app's files.
			claim := func() nsClaim {
				return nsClaim{who: what + " (its " + o.kind + " " + o.name + ")", pos: locateObject(app, o)}
			}
			switch {
			case o.kind == "Namespace" && o.apiVersion == "v1":
				x.claimNamespace(o.name, claim, true, owned, fleetbot, workspaces)
			case o.namespace != "" && !used[o.namespace]:
				used[o.namespace] = true
				x.claimNamespace(o.namespace, claim, false, nil, fleetbot, workspaces)
			}
		}
	}
}

// claimNamespace reports the collisions of one component's claim on ns (renders its Namespace
// when owns is set, else places objects in it) with the owners known; claim says who claims it
// and where (called only for an issue: it parses the app's files). owned holds the claims of the
// Namespaces components render.
func (x *run) claimNamespace(ns string, claim func() nsClaim, owns bool, owned map[string]func() nsClaim, fleetbot, workspaces map[string]nsClaim) {
	switch {
	case owns && control.SystemNamespace(ns):
		here := claim()
		x.addOnce(here.pos, "remove the Namespace object from the app (its objects may still live in "+ns+"): the system owns it",
			"%s renders Namespace %s, which belongs to Kubernetes or Flux: a namespace has one owner", here.who, ns)
		return
	case fleetbot[ns].who != "":
		here := claim()
		x.addOnce(here.pos, "use a namespace of the component's own; fleetbot itself is deployed with deploy/ (kubectl apply -k)",
			"%s claims namespace %s, which belongs to %s: it holds fleetbot's credentials", here.who, ns, fleetbot[ns])
		return
	case workspaces[ns].who != "":
		x.addOnce(workspaces[ns].pos, "give the workspace a namespace of its own (spec.namespace), or move the component",
			"namespace %s is claimed by %s and by %s: the workspace would be admin beside the component's objects, and a namespace has one owner",
			ns, workspaces[ns], claim())
		return
	}
	if !owns {
		return
	}
	if first, dup := owned[ns]; dup {
		here := claim()
		x.addOnce(here.pos, "render the Namespace in one component only (the other may still put objects in it)",
			"%s renders Namespace %s, which %s renders too: removing either component would prune the namespace with everything in it", here.who, ns, first())
		return
	}
	owned[ns] = claim
}
