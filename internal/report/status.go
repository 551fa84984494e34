package report

import (
	"strings"
	"time"
)

// RepoStatus is where one target repo stands, as fleetbot status and the /status page show it:
// the part of a status document's repo entry beyond what plan and apply say (its action,
// reason and error are the entry's own).
type RepoStatus struct {
	// State is unhealthy, failed, blocked, deferred, pending, pr-open, in-sync or skipped.
	State string `json:"state"`
	// Segment is where the repo counts in a progress bar (healthy, done, open, pending,
	// halted): the colour of its badge on the page.
	Segment string `json:"segment"`
	// Summary says it all in one line.
	Summary string `json:"summary"`
	// Labels are the cluster's or workspace's labels; Group its group of the view, Wave its
	// rollout wave (a cluster, when waves are declared).
	Labels map[string]string `json:"labels,omitempty"`
	Group  string            `json:"group"`
	Wave   string            `json:"wave,omitempty"`
	// Provisions lists, for a management repo, the clusters whose HelmRelease it holds;
	// ProvisionedBy is, for a provisioned cluster, the management repo holding it.
	Provisions    []string `json:"provisions,omitempty"`
	ProvisionedBy string   `json:"provisionedBy,omitempty"`
	// URL is the repo's web page ("" on the local forge).
	URL string `json:"url,omitempty"`
	// Revision is the control-repo revision fleetbot last rendered for the repo; Merged the
	// one it last merged.
	Revision string `json:"revision,omitempty"`
	Merged   string `json:"merged,omitempty"`
	// PR is the open fleetbot pull request, and WaitingOn who or what must act next.
	PR        *OpenPR `json:"pr,omitempty"`
	WaitingOn string  `json:"waitingOn,omitempty"`
	// Health is the combined commit status of the default-branch head (Flux posts one for the
	// commit it applied): success, pending, failure, error or unknown; Failing its failing
	// statuses.
	Health  string        `json:"health"`
	Failing []HealthCheck `json:"failing,omitempty"`
	// Drift lists what differs outside a pull request (access, CODEOWNERS errors).
	Drift []string `json:"drift,omitempty"`
	// CheckedAt is when the result was computed.
	CheckedAt time.Time `json:"checkedAt,omitzero"`
}

// OpenPR is an open fleetbot pull request as a status view shows it.
type OpenPR struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
	// Opened is when it was opened; AgeSeconds how long ago (0 when unknown).
	Opened     time.Time `json:"opened,omitzero"`
	AgeSeconds int64     `json:"ageSeconds,omitempty"`
	// Source is the control-repo revision it carries.
	Source string `json:"source,omitempty"`
	// Review is GitHub's review decision, Checks the combined status of its head.
	Review string `json:"review,omitempty"`
	Checks string `json:"checks,omitempty"`
}

// HealthCheck is one failing commit status of a default-branch head: Flux's verdict on one
// Kustomization or HelmRelease.
type HealthCheck struct {
	// Context is the status's context ("kustomization/platform-metallb/0c1d2e3f").
	Context string `json:"context"`
	// Object is the Flux object it reports on ("Kustomization/platform-metallb"), when the
	// context is Flux's.
	Object string `json:"object,omitempty"`
	// State is failure or error.
	State string `json:"state"`
	// Description is Flux's message; URL the status's link (target_url), when it has one.
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
}

// fluxKinds are the kinds Flux's notification-controller names in a commit status context
// ("<kind>/<name>/<provider uid prefix>"), lower case.
var fluxKinds = map[string]string{"kustomization": "Kustomization", "helmrelease": "HelmRelease"}

// FluxObject reads the Flux object a commit status context reports on:
// "kustomization/platform-metallb/0c1d" is "Kustomization/platform-metallb"; "" when the
// context is not Flux's.
func FluxObject(context string) string {
	parts := strings.Split(context, "/")
	if len(parts) < 2 || parts[1] == "" {
		return ""
	}
	kind, ok := fluxKinds[strings.ToLower(parts[0])]
	if !ok {
		return ""
	}
	return kind + "/" + parts[1]
}

// What is the failing object, or the context when it is not Flux's.
func (h HealthCheck) What() string {
	if h.Object != "" {
		return h.Object
	}
	return h.Context
}
