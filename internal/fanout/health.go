package fanout

import "fmt"

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
