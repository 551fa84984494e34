package fanout

import (
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	notificationv1 "github.com/fluxcd/notification-controller/api/v1"
	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// Names of the objects that make Flux report a cluster's health to GitHub, rendered into
// flux/fleetbot.yaml when the platform declares rollout waves (spec.rollout.waves).
const (
	// HealthProvider is the notification-controller Provider (type github) that posts a
	// commit status on the cluster repo's commit each Kustomization applied.
	HealthProvider = "fleetbot-health"
	// HealthSecret is the Secret in flux-system the platform admin provides, holding the
	// GitHub credentials the Provider posts with (key token: a token allowed to write
	// commit statuses on the cluster repo; or a GitHub App's githubAppID,
	// githubAppInstallationID and githubAppPrivateKey).
	HealthSecret = "fleetbot-health"
	// HealthAlert sends every Kustomization event of flux-system to HealthProvider.
	HealthAlert = "fleetbot-health"
)

// fluxHealth renders the Provider and Alert that make Flux post a commit status
// ("kustomization/<name>/<uid prefix>") on the cluster repo for every Kustomization of
// flux-system: the health a rollout wave is gated on. repoURL is the cluster repo's URL.
func fluxHealth(repoURL string) []byte {
	return fmt.Appendf(nil, `# Flux reports the health of every commit it applies to GitHub as a commit status: a
# rollout in waves (platform spec.rollout.waves) waits for it. The Secret %[2]s in
# flux-system is provided by the platform admins (see the fleetbot README).
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata:
  labels:
    %[4]s: fleetbot
  name: %[1]s
  namespace: %[5]s
spec:
  address: %[6]s
  secretRef:
    name: %[2]s
  type: github
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata:
  labels:
    %[4]s: fleetbot
  name: %[3]s
  namespace: %[5]s
spec:
  eventSeverity: info
  eventSources:
  - kind: Kustomization
    name: '*'
    namespace: %[5]s
  providerRef:
    name: %[1]s
`, HealthProvider, HealthSecret, HealthAlert, managedByLabel, FluxNamespace, repoURL)
}

// Health over generic-hmac (spec.rollout.health.provider: generic-hmac): notification-controller
// posts every event of the cluster's Kustomizations and HelmReleases to fleetbot serve, signed,
// and no cluster holds a GitHub credential.
const (
	// HealthMetaCluster and HealthMetaWorkspace are the event metadata the Alerts add, naming
	// the cluster and the workspace an event comes from (rollout.MetaCluster).
	HealthMetaCluster   = "fleetbot.io/cluster"
	HealthMetaWorkspace = "fleetbot.io/workspace"
)

// HealthURL is where a cluster's Provider in namespace ns posts: base/<cluster> for
// flux-system, base/<cluster>/<ns> for a workspace namespace (or a management cluster's
// provision namespace). The names are DNS labels, so they need no escaping.
func HealthURL(base, cluster, ns string) string {
	u := strings.TrimSuffix(base, "/") + "/" + cluster
	if ns != "" && ns != FluxNamespace {
		u += "/" + ns
	}
	return u
}

// health renders the objects that report cluster's health for a rollout in waves, for
// flux/fleetbot.yaml: the github Provider and Alert (the default), or with generic-hmac the
// Provider and Alert of flux-system and, for a workspace cluster, those of the workspace
// namespace. repoURL is the cluster repo's URL.
func (x *run) health(cluster string, in fluxInput, repoURL string) ([]byte, error) {
	h := x.repo.HealthDelivery()
	if h.Provider != control.HealthGenericHMAC {
		return fluxHealth(repoURL), nil
	}
	md := map[string]string{HealthMetaCluster: cluster}
	objs := hmacHealth(HealthProvider, FluxNamespace, HealthURL(h.URL, cluster, ""), HealthSecret, md,
		[]notificationv1.CrossNamespaceObjectReference{
			{Kind: kustomizev1.KustomizationKind, Name: "*", Namespace: FluxNamespace},
			{Kind: helmv2.HelmReleaseKind, Name: "*", Namespace: FluxNamespace},
		})
	if in.workspace != "" {
		md := map[string]string{HealthMetaCluster: cluster, HealthMetaWorkspace: in.workspace}
		objs = append(objs, hmacHealth(HealthProvider, in.namespace, HealthURL(h.URL, cluster, in.namespace), HealthSecret, md,
			[]notificationv1.CrossNamespaceObjectReference{
				{Kind: kustomizev1.KustomizationKind, Name: "*", Namespace: in.namespace},
				{Kind: helmv2.HelmReleaseKind, Name: "*", Namespace: in.namespace},
			})...)
	}
	return marshalAll(hmacHealthComment, objs...)
}

// hmacHealthComment heads the generic-hmac health objects of flux/fleetbot.yaml.
const hmacHealthComment = `# Flux reports every event of this cluster's Kustomizations and HelmReleases to fleetbot
# serve, signed with the cluster's key: a rollout in waves (platform spec.rollout.waves)
# waits for their health. The platform admins create the Secret fleetbot-health (key token)
# in flux-system and in the workspace namespace (see the fleetbot README).
`

// hmacHealth is the Provider (type generic-hmac, posting to address with the token of the
// Secret secret) and the Alert (sources, metadata) of one namespace, as notification-controller's
// v1beta3 types: lockdown's --no-cross-namespace-refs confines an Alert to its namespace's
// objects and its Provider, and a Provider to its namespace's Secret.
func hmacHealth(name, ns, address, secret string, metadata map[string]string, sources []notificationv1.CrossNamespaceObjectReference) []any {
	om := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{managedByLabel: "fleetbot"}}
	return []any{
		&notificationv1beta3.Provider{
			TypeMeta:   metav1.TypeMeta{APIVersion: notificationv1beta3.GroupVersion.String(), Kind: notificationv1beta3.ProviderKind},
			ObjectMeta: om,
			Spec: notificationv1beta3.ProviderSpec{
				Type:      notificationv1beta3.GenericHMACProvider,
				Address:   address,
				SecretRef: &meta.LocalObjectReference{Name: secret},
			},
		},
		&notificationv1beta3.Alert{
			TypeMeta:   metav1.TypeMeta{APIVersion: notificationv1beta3.GroupVersion.String(), Kind: notificationv1beta3.AlertKind},
			ObjectMeta: om,
			Spec: notificationv1beta3.AlertSpec{
				ProviderRef:   meta.LocalObjectReference{Name: name},
				EventSeverity: "info",
				EventSources:  sources,
				EventMetadata: metadata,
			},
		},
	}
}
