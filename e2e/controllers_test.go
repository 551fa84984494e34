package e2e

import (
	"context"
	"fmt"
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

// startNotificationController runs notification-controller out of cluster
// with its event and webhook-receiver servers on 127.0.0.1; the other
// controllers post their events to e.eventsURL. Ready when /readyz of its
// health server answers.
func (e *environment) startNotificationController() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	events := "127.0.0.1:" + strconv.Itoa(ports[0])
	health := "127.0.0.1:" + strconv.Itoa(ports[2])
	p, err := e.spawn("notification-controller", e.bin("notification-controller"), append([]string{
		"--events-addr=" + events, "--receiverAddr=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-addr=0", "--health-addr=" + health, "--enable-leader-election=false",
		"--watch-all-namespaces=true", "--log-level=info",
	}, notificationLockdownArgs...), []string{"KUBECONFIG=" + e.kubeconfig, "RUNTIME_NAMESPACE=flux-system"})
	if err != nil {
		return err
	}
	e.eventsURL = "http://" + events
	return waitReadyz(p, health)
}

// startHelmController runs helm-controller out of cluster; it fetches
// charts from source-controller's artifact server and posts events to
// notification-controller.
func (e *environment) startHelmController() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	health := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := e.spawn("helm-controller", e.bin("helm-controller"), append([]string{
		"--metrics-addr=0", "--health-addr=" + health, "--enable-leader-election=false", "--events-addr=" + e.eventsURL,
		"--watch-all-namespaces=true", "--log-level=info",
	}, helmLockdownArgs...), []string{"KUBECONFIG=" + e.kubeconfig, "RUNTIME_NAMESPACE=flux-system"})
	if err != nil {
		return err
	}
	return waitReadyz(p, health)
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
