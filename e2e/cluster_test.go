package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// fluxCluster is a cluster of one test's own: an API server (see
// startSecondAPIServer) with Flux controllers of its own, so the test owns
// its flux-system namespace, which every repo fleetbot renders bootstraps
// into (the env's flux-system belongs to TestFleetOnFlux).
type fluxCluster struct {
	kube       *kubeClient
	url        string
	pki        *pki
	kubeconfig string
	events     string // its notification-controller's event endpoint; "" without one
}

// clusterFlux says which Flux a fluxCluster runs: source-controller and
// kustomize-controller always; helm-controller and notification-controller
// when asked; the multi-tenancy lockdown flags (as fleetbot's cluster repo
// scaffold sets them) or none (a management repo has no scaffold).
type clusterFlux struct {
	helm, notification, lockdown bool
}

// startFluxCluster starts cluster name with the Flux of want, its CRDs
// installed; everything stops when the test ends.
func (e *environment) startFluxCluster(t *testing.T, name string, want clusterFlux) *fluxCluster {
	t.Helper()
	kube, url, p := e.startSecondAPIServer(t, name)
	c := &fluxCluster{kube: kube, url: url, pki: p, kubeconfig: e.path("pki-"+name, "admin.kubeconfig")}
	require.NoError(t, writeKubeconfig(c.kubeconfig, url, p))
	require.NoError(t, e.installFluxCRDs(kube), "installing Flux's CRDs on %s", name)
	site := fluxSite{suffix: "-" + name, kubeconfig: c.kubeconfig, lockdown: want.lockdown}
	var procs []*process
	t.Cleanup(func() { stopProcesses(procs...) })
	if want.notification {
		nc, events, err := e.startNotificationController(site)
		if nc != nil {
			procs = append(procs, nc)
		}
		require.NoError(t, err)
		c.events, site.events = events, events
	}
	flux, err := e.startFlux(site)
	procs = append(procs, flux...)
	require.NoError(t, err)
	if want.helm {
		hc, err := e.startHelmController(site)
		if hc != nil {
			procs = append(procs, hc)
		}
		require.NoError(t, err)
	}
	return c
}
