package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// wirePropertyValue is one custom property value of a repo.
type wirePropertyValue struct {
	PropertyName string `json:"property_name"`
	Value        any    `json:"value"`
}

// observeProperties reads the repo's custom property values.
//
// GitHub API docs: https://docs.github.com/rest/repos/custom-properties#get-all-custom-property-values-for-a-repository
func (f *Forge) observeProperties(ctx context.Context, owner, repo string, a *policy.Access) error {
	req, err := f.api.NewRequest(http.MethodGet, "repos/"+owner+"/"+repo+"/properties/values", nil)
	if err != nil {
		return err
	}
	var vals []wirePropertyValue
	if _, err := f.api.Do(ctx, req, &vals); err != nil {
		return errf(err, "reading the custom properties of", owner+"/"+repo)
	}
	for _, v := range vals {
		if s, ok := v.Value.(string); ok && strings.HasPrefix(v.PropertyName, policy.PropertyPrefix) {
			if a.Properties == nil {
				a.Properties = map[string]string{}
			}
			a.Properties[v.PropertyName] = s
		}
	}
	return nil
}

// giveProperties sets the plan's custom property values, after making sure the org defines
// them.
//
// GitHub API docs: https://docs.github.com/rest/repos/custom-properties#create-or-update-custom-property-values-for-a-repository
func giveProperties(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	if len(p.Properties) == 0 {
		return nil
	}
	if err := f.ensurePropertySchema(ctx, r.owner); err != nil {
		return err
	}
	body := struct {
		Properties []wirePropertyValue `json:"properties"`
	}{}
	for _, k := range sortedKeys(p.Properties) {
		body.Properties = append(body.Properties, wirePropertyValue{PropertyName: k, Value: p.Properties[k]})
	}
	req, err := f.api.NewRequest(http.MethodPatch, "repos/"+r.owner+"/"+r.repo+"/properties/values", body)
	if err != nil {
		return err
	}
	if _, err := f.api.Do(ctx, req, nil); err != nil {
		return errf(err, "setting the custom properties of", r.full())
	}
	return nil
}

// fleetbotProperties are the custom properties fleetbot defines in an org: fleetbot-kind (one
// of cluster, workspace, management) and the name of the repo's cluster, workspace or
// management cluster.
var fleetbotProperties = []string{policy.PropertyKind, policy.PropertyPrefix + "cluster", policy.PropertyPrefix + "workspace", policy.PropertyPrefix + "management"}

// ensurePropertySchema defines the custom properties fleetbot sets, once per run: one read of
// the org's schema, and one write when any is missing. It needs the App's organization
// permission "Custom properties" (admin); opt-in with spec.access.branchRules.organization.
//
// GitHub API docs: https://docs.github.com/rest/orgs/custom-properties#get-all-custom-properties-for-an-organization
// GitHub API docs: https://docs.github.com/rest/orgs/custom-properties#create-or-update-custom-properties-for-an-organization
func (f *Forge) ensurePropertySchema(ctx context.Context, owner string) error {
	seen := f.seenOrg(owner)
	if seen == nil {
		seen = &orgSeen{}
	}
	seen.orgMu.Lock()
	defer seen.orgMu.Unlock()
	if seen.schemaDone {
		return nil
	}
	hint := "the App needs the organization permission Custom properties: admin, or set spec.access.branchRules.organization to false"
	req, err := f.api.NewRequest(http.MethodGet, "orgs/"+owner+"/properties/schema", nil)
	if err != nil {
		return err
	}
	var defs []struct {
		PropertyName string `json:"property_name"`
	}
	if _, err := f.api.Do(ctx, req, &defs); err != nil {
		return fmt.Errorf("reading the custom properties of %s (%s): %w", owner, hint, err)
	}
	have := map[string]bool{}
	for _, d := range defs {
		have[d.PropertyName] = true
	}
	type def struct {
		PropertyName  string   `json:"property_name"`
		ValueType     string   `json:"value_type"`
		Required      bool     `json:"required"`
		Description   string   `json:"description"`
		AllowedValues []string `json:"allowed_values,omitempty"`
	}
	var missing []def
	for _, name := range fleetbotProperties {
		if have[name] {
			continue
		}
		d := def{PropertyName: name, ValueType: "string", Description: "set by fleetbot: the " + strings.TrimPrefix(name, policy.PropertyPrefix) + " this repo is for"}
		if name == policy.PropertyKind {
			d.ValueType, d.AllowedValues = "single_select", []string{"cluster", "workspace", "management"}
			d.Description = "set by fleetbot: what this repo is (cluster, workspace or management); fleetbot's organization ruleset targets it"
		}
		missing = append(missing, d)
	}
	if len(missing) > 0 {
		req, err := f.api.NewRequest(http.MethodPatch, "orgs/"+owner+"/properties/schema", map[string]any{"properties": missing})
		if err != nil {
			return err
		}
		if _, err := f.api.Do(ctx, req, nil); err != nil {
			return fmt.Errorf("defining the custom properties %s of %s (%s): %w", strings.Join(fleetbotProperties, ", "), owner, hint, err)
		}
	}
	seen.schemaDone = true
	return nil
}
