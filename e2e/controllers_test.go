package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The lockdown flags fleetbot's scaffold (flux/flux-system/kustomization.yaml)
// gives helm-controller and notification-controller, as the Flux
// multi-tenancy lockdown does.
var (
	helmLockdownArgs         = []string{"--no-cross-namespace-refs=true", "--default-service-account=default"}
	notificationLockdownArgs = []string{"--no-cross-namespace-refs=true"}
)

// fluxSite is where a set of Flux controllers runs: out of cluster against
// the API server of kubeconfig, as a bootstrapped Flux does in cluster. The
// env's own set has suffix ""; another cluster's set suffixes its process
// names and storage with "-" + its name.
type fluxSite struct {
	suffix     string
	kubeconfig string
	events     string // notification-controller's event endpoint; "" posts no events
	lockdown   bool   // the multi-tenancy lockdown flags, as fleetbot's scaffold sets them
}

func (s fluxSite) env() []string {
	return []string{"KUBECONFIG=" + s.kubeconfig, "RUNTIME_NAMESPACE=flux-system"}
}

// common are the flags of every controller of the site.
func (s fluxSite) common(health string) []string {
	args := []string{"--metrics-addr=0", "--health-addr=" + health, "--enable-leader-election=false",
		"--watch-all-namespaces=true", "--log-level=info"}
	if s.events != "" {
		args = append(args, "--events-addr="+s.events)
	}
	return args
}

// startNotificationController runs notification-controller of site with its
// event and webhook-receiver servers on 127.0.0.1, and returns its event
// endpoint, where the site's other controllers post. Ready when /readyz of
// its health server answers.
func (e *environment) startNotificationController(site fluxSite) (*process, string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", err
	}
	events := "127.0.0.1:" + strconv.Itoa(ports[0])
	health := "127.0.0.1:" + strconv.Itoa(ports[2])
	args := []string{"--events-addr=" + events, "--receiverAddr=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-addr=0", "--health-addr=" + health, "--enable-leader-election=false",
		"--watch-all-namespaces=true", "--log-level=info"}
	if site.lockdown {
		args = append(args, notificationLockdownArgs...)
	}
	p, err := e.spawn("notification-controller"+site.suffix, e.bin("notification-controller"), args, site.env())
	if err != nil {
		return nil, "", err
	}
	return p, "http://" + events, waitReadyz(p, health)
}

// startFlux runs source-controller and kustomize-controller of site, with
// leader election off and the artifact server on 127.0.0.1 (in cluster they
// run with cluster-admin; here with the site's admin kubeconfig).
func (e *environment) startFlux(site fluxSite) ([]*process, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	storage := "127.0.0.1:" + strconv.Itoa(ports[0])
	dir := e.path("flux-storage" + site.suffix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	src, err := e.spawn("source-controller"+site.suffix, e.bin("source-controller"), append([]string{
		"--storage-path=" + dir, "--storage-addr=" + storage, "--storage-adv-addr=" + storage,
	}, site.common("127.0.0.1:"+strconv.Itoa(ports[1]))...), site.env())
	if err != nil {
		return nil, err
	}
	args := append(site.common("127.0.0.1:"+strconv.Itoa(ports[2])), "--requeue-dependency=2s")
	if site.lockdown {
		args = append(args, fluxLockdownArgs...)
	}
	ks, err := e.spawn("kustomize-controller"+site.suffix, e.bin("kustomize-controller"), args, site.env())
	if err != nil {
		return []*process{src}, err
	}
	procs := []*process{src, ks}
	return procs, poll(context.Background(), 30*time.Second, "source-controller"+site.suffix+" storage server", func() (bool, string, error) {
		for _, p := range procs {
			if err := p.exited(); err != nil {
				return false, "", err
			}
		}
		_, err := plainGet("http://" + storage + "/")
		return err == nil, fmt.Sprint(err), nil
	})
}

// startHelmController runs helm-controller of site; it fetches charts from
// source-controller's artifact server and posts events to the site's
// notification-controller.
func (e *environment) startHelmController(site fluxSite) (*process, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := site.common(health)
	if site.lockdown {
		args = append(args, helmLockdownArgs...)
	}
	p, err := e.spawn("helm-controller"+site.suffix, e.bin("helm-controller"), args, site.env())
	if err != nil {
		return nil, err
	}
	return p, waitReadyz(p, health)
}

// waitReadyz polls a controller's health server until /readyz answers.
func waitReadyz(p *process, health string) error {
	return poll(context.Background(), 60*time.Second, p.name+" /readyz", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		out, err := plainGet("http://" + health + "/readyz")
		return err == nil && strings.TrimSpace(out) == "ok", fmt.Sprint(out, err), nil
	})
}

// installFluxCRDs applies the CRDs of the pinned controllers on kube, as
// flux install does before starting them, and waits until the API server
// serves every version of every kind they define: a controller starting
// earlier exits, unable to map a kind it watches.
func (e *environment) installFluxCRDs(kube *kubeClient) error {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(e.tools, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s/crds: rerun scripts/e2e-tools.sh", e.tools)
	}
	var served [][2]string // apiVersion, kind
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		docs, err := splitYAML(data)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		for _, d := range docs {
			group, _ := field(d, "spec", "group").(string)
			kind, _ := field(d, "spec", "names", "kind").(string)
			versions, _ := field(d, "spec", "versions").([]any)
			for _, v := range versions {
				m, _ := v.(map[string]any)
				if name, _ := m["name"].(string); m["served"] == true {
					served = append(served, [2]string{group + "/" + name, kind})
				}
			}
		}
		if err := kube.applyYAML(ctx, data, ""); err != nil {
			return fmt.Errorf("applying %s: %w", f, err)
		}
	}
	if len(served) == 0 {
		return fmt.Errorf("the CRDs in %s/crds serve no version", e.tools)
	}
	return poll(ctx, 60*time.Second, "Flux CRDs established", func() (bool, string, error) {
		kube.forgetDiscovery()
		for _, k := range served {
			if _, err := kube.resourceFor(ctx, k[0], k[1]); err != nil {
				return false, err.Error(), nil
			}
		}
		return true, "", nil
	})
}
