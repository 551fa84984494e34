package control

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxComponentName is the longest app name a platform component may have:
// its Flux Kustomization is platform-<app>, and Flux writes that name into
// the label kustomize.toolkit.fluxcd.io/name of every object it applies,
// whose value has at most 63 characters.
const MaxComponentName = 63 - len("platform-")

// DependencyClosure returns the apps app depends on, directly or through
// other apps' spec.dependsOn, sorted and without app itself. Unknown names
// are skipped (Validate reports them) and a cycle ends the walk.
func (r *Repo) DependencyClosure(app string) []string {
	seen := map[string]bool{app: true}
	var out []string
	var walk func(name string)
	walk = func(name string) {
		a := r.App(name)
		if a == nil {
			return
		}
		for _, d := range a.Spec.DependsOn {
			if seen[d] || r.App(d) == nil {
				continue
			}
			seen[d] = true
			out = append(out, d)
			walk(d)
		}
	}
	walk(app)
	slices.Sort(out)
	return out
}

// dependsOn checks every app's spec.dependsOn: known apps, no duplicate, no
// self-reference, no cycle, and on every cluster where the app is a platform
// component each dependency is one too (Flux would otherwise wait forever
// for a Kustomization that does not exist). It also bounds component names
// by MaxComponentName.
func (v *validator) dependsOn() {
	for _, a := range v.r.Apps {
		name, src := a.Metadata.Name, a.Source
		seen := map[string]int{}
		for i, d := range a.Spec.DependsOn {
			pos := src.At(fmt.Sprintf("spec.dependsOn.%d", i))
			switch {
			case d == name:
				v.add(pos, "remove it from spec.dependsOn", "app %s depends on itself", name)
			case v.r.App(d) == nil:
				v.add(pos, "add catalog/"+d+"/app.yaml or use one of: "+listOrNone(v.appNames()),
					"app %s depends on unknown app %q", name, d)
			}
			if j, dup := seen[d]; dup {
				v.add(pos, "remove the second entry", "app %s lists dependency %q twice (first at %s)", name, d, src.At(fmt.Sprintf("spec.dependsOn.%d", j)))
			} else {
				seen[d] = i
			}
		}
	}
	v.dependencyCycles()
	v.componentDependencies()
}

// dependencyCycles reports each cycle of spec.dependsOn once, at the entry
// of the cycle's alphabetically first app that closes it.
func (v *validator) dependencyCycles() {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	reported := map[string]bool{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		state[name] = active
		stack = append(stack, name)
		a := v.r.App(name)
		for _, d := range a.Spec.DependsOn {
			if d == name || v.r.App(d) == nil {
				continue // reported by dependsOn
			}
			switch state[d] {
			case unvisited:
				visit(d)
			case active:
				cycle := append(slices.Clone(stack[slices.Index(stack, d):]), d)
				// Report at the cycle's smallest app, whatever the walk's start.
				first := slices.Index(cycle, slices.Min(cycle[:len(cycle)-1]))
				cycle = append(slices.Clone(cycle[first:len(cycle)-1]), cycle[:first+1]...)
				key := strings.Join(cycle, " ")
				if reported[key] {
					continue
				}
				reported[key] = true
				from := v.r.App(cycle[0])
				at := from.Source.At(fmt.Sprintf("spec.dependsOn.%d", slices.Index(from.Spec.DependsOn, cycle[1])))
				v.add(at, "Flux would wait forever on each of them: remove one of these dependsOn entries",
					"dependsOn cycle: %s", strings.Join(cycle, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
	}
	for _, a := range v.r.Apps {
		if state[a.Metadata.Name] == unvisited {
			visit(a.Metadata.Name)
		}
	}
}

// componentDependencies checks, for every platform component, that its
// dependencies are components of every cluster it is deployed to, and that
// its name fits the Flux Kustomization named after it.
func (v *validator) componentDependencies() {
	p := v.r.Platform
	if p == nil {
		return
	}
	index := map[string]int{}
	for i, comp := range p.Spec.Components {
		if _, ok := index[comp.App]; !ok {
			index[comp.App] = i
		}
		if len(comp.App) > MaxComponentName && v.r.App(comp.App) != nil {
			v.add(p.Source.At(fmt.Sprintf("spec.components.%d.app", i)),
				fmt.Sprintf("rename the app to at most %d characters", MaxComponentName),
				"component %s: name is %d characters long; its Flux Kustomization platform-%s would exceed the 63 characters of a label value",
				comp.App, len(comp.App), comp.App)
		}
	}
	// missing[component][dependency] lists the clusters lacking it.
	missing := map[string]map[string][]string{}
	dp := v.r.deployer()
	for _, c := range v.r.Clusters {
		components := map[string]bool{}
		deps := dp.cluster(c, nil, false)
		for _, d := range deps {
			if d.Workspace == nil {
				components[d.App.Metadata.Name] = true
			}
		}
		for _, d := range deps {
			if d.Workspace != nil {
				continue
			}
			for _, dep := range d.App.Spec.DependsOn {
				if dep == d.App.Metadata.Name || v.r.App(dep) == nil || components[dep] {
					continue
				}
				name := d.App.Metadata.Name
				if missing[name] == nil {
					missing[name] = map[string][]string{}
				}
				missing[name][dep] = append(missing[name][dep], c.Metadata.Name)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(missing)) {
		a := v.r.App(name)
		for _, dep := range slices.Sorted(maps.Keys(missing[name])) {
			clusters := missing[name][dep]
			hint := fmt.Sprintf("select %s on these clusters too (spec.components in platform.yaml), narrow %s's clusterSelector (%s), or drop %s from spec.dependsOn in %s",
				dep, name, p.Source.At(fmt.Sprintf("spec.components.%d.clusterSelector", index[name])), dep, a.Source.File)
			if _, listed := index[dep]; !listed {
				hint = fmt.Sprintf("add %s to spec.components in platform.yaml with a clusterSelector covering %s's, or drop it from spec.dependsOn in %s", dep, name, a.Source.File)
			}
			v.add(a.Source.At(fmt.Sprintf("spec.dependsOn.%d", slices.Index(a.Spec.DependsOn, dep))), hint,
				"component %s depends on %s, which is not a component of cluster(s) %s: Flux would wait forever for Kustomization platform-%s there",
				name, dep, strings.Join(clusters, ", "), dep)
		}
	}
}
