package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ToolsEnv names the directory scripts/e2e-tools.sh prints: bin/ with the
// pinned binaries (links into each tool set's cache directory) and crds/
// with Flux's CRDs.
const ToolsEnv = "FLEETBOT_E2E_TOOLS"

// env is the one environment every test of the package shares: starting
// an API server and Flux takes seconds, each test works in its own repos
// and namespaces. It is set once by TestMain before any test runs.
var env *environment

func TestMain(m *testing.M) {
	tools := os.Getenv(ToolsEnv)
	if tools == "" {
		fmt.Println("e2e: " + ToolsEnv + " is not set: the end-to-end tests did not run (run make e2e)")
		os.Exit(0)
	}
	os.Exit(run(m, tools))
}

// run starts the environment, runs the tests and always tears everything
// down: on return, on a failed start and on SIGINT/SIGTERM. Each process
// also dies with the test binary (Pdeathsig) if it is killed outright.
func run(m *testing.M, tools string) int {
	start := time.Now()
	e, err := newEnvironment(tools)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if s, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "e2e: %v: tearing down\n", s)
			e.stop()
			os.Exit(1)
		}
	}()
	defer signal.Stop(sig)
	defer e.stop()
	if err := e.start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the environment:", err)
		e.dumpLogs(os.Stderr)
		return 1
	}
	fmt.Printf("e2e: environment up in %s (API server %s, git %s, work dir %s)\n",
		time.Since(start).Round(100*time.Millisecond), e.apiURL, e.gitURL, e.dir)
	env = e
	code := m.Run()
	if code != 0 {
		e.dumpLogs(os.Stderr)
	}
	return code
}

// environment is one running cluster and git server, and their files.
type environment struct {
	tools    string // FLEETBOT_E2E_TOOLS
	dir      string // everything the run writes
	keep     bool   // FLEETBOT_E2E_KEEP=1: leave dir for inspection
	fleetbot string // the fleetbot binary built from this tree
	forge    string // the local forge's directory
	control  string // the control repo the tests edit

	etcdURL    string // the etcd every API server of the run stores in
	apiURL     string
	kubeconfig string
	kube       *kubeClient
	gitURL     string // http://127.0.0.1:PORT serving forge
	eventsURL  string // notification-controller's event endpoint, where the other controllers post

	mu    sync.Mutex
	procs []*process
}

// process is one started binary and its log.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func newEnvironment(tools string) (*environment, error) {
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "source-controller", "kustomize-controller", "helm-controller", "notification-controller"} {
		if _, err := os.Stat(filepath.Join(tools, "bin", b)); err != nil {
			return nil, fmt.Errorf("%s=%s has no bin/%s: run scripts/e2e-tools.sh (make e2e does)", ToolsEnv, tools, b)
		}
	}
	for _, b := range []string{"etcd", "git", "go"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("%s not found in PATH (etcd: apt-get install etcd-server)", b)
		}
	}
	dir, err := os.MkdirTemp("", "fleetbot-e2e-")
	if err != nil {
		return nil, err
	}
	return &environment{tools: tools, dir: dir, keep: os.Getenv("FLEETBOT_E2E_KEEP") == "1"}, nil
}

// start brings everything up in dependency order, each step waiting for
// the previous one to be ready by polling with a deadline.
func (e *environment) start() error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	e.fleetbot = filepath.Join(e.dir, "fleetbot")
	build := exec.Command("go", "build", "-o", e.fleetbot, "./cmd/bot")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building fleetbot: %v\n%s", err, out)
	}
	pki, err := newPKI(filepath.Join(e.dir, "pki"))
	if err != nil {
		return err
	}
	if err := e.startEtcd(); err != nil {
		return err
	}
	if err := e.startAPIServer(pki); err != nil {
		return err
	}
	if err := e.startControllerManager(pki); err != nil {
		return err
	}
	if err := e.installFluxCRDs(e.kube); err != nil {
		return err
	}
	site := fluxSite{kubeconfig: e.kubeconfig, lockdown: true}
	if _, e.eventsURL, err = e.startNotificationController(site); err != nil {
		return err
	}
	site.events = e.eventsURL
	if _, err := e.startFlux(site); err != nil {
		return err
	}
	if _, err := e.startHelmController(site); err != nil {
		return err
	}
	e.forge = filepath.Join(e.dir, "forge")
	if err := os.MkdirAll(e.forge, 0o755); err != nil {
		return err
	}
	return e.startGitServer()
}

func (e *environment) path(elem ...string) string {
	return filepath.Join(append([]string{e.dir}, elem...)...)
}

func (e *environment) bin(name string) string { return filepath.Join(e.tools, "bin", name) }

// freePort returns a port nothing listens on now; the process it is given
// to binds it a moment later.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	// Hold all listeners until every port is chosen, so the n differ.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// spawn starts a process in its own process group, logging to
// dir/logs/name.log; it is killed with the test binary if that dies.
func (e *environment) spawn(name, bin string, args, extraEnv []string) (*process, error) {
	if err := os.MkdirAll(e.path("logs"), 0o755); err != nil {
		return nil, err
	}
	logPath := e.path("logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// exited reports whether p has ended, with why.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v (log: %s)", p.name, p.err, p.log)
	default:
		return nil
	}
}

// stop ends every started process by its process group, newest first:
// SIGTERM, then SIGKILL after a grace period. It is safe to call twice.
func (e *environment) stop() {
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].terminate()
	}
	if !e.keep {
		_ = os.RemoveAll(e.dir)
	} else if len(procs) > 0 {
		fmt.Fprintln(os.Stderr, "e2e: kept", e.dir)
	}
}

// terminate ends p by its process group: SIGTERM, then SIGKILL after a
// grace period. It returns once p has exited; an ended p is left alone.
func (p *process) terminate() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second): // teardown grace for a real process, not a test verdict
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// stopProcesses ends procs, newest first, before the environment stops: a
// test's own cluster goes away with the test. They stay listed, so a failed
// run still prints their logs.
func stopProcesses(procs ...*process) {
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].terminate()
	}
}

// dumpLogs prints the tail of every process log, for a failed start or test.
func (e *environment) dumpLogs(w *os.File) {
	e.mu.Lock()
	procs := append([]*process(nil), e.procs...)
	e.mu.Unlock()
	for _, p := range procs {
		data, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(w, "----- %s (last %d lines of %s)\n%s\n", p.name, len(lines), p.log, strings.Join(lines, "\n"))
	}
}

// poll calls cond until it returns true or an error, or the deadline
// passes; the error then says what was awaited and the last state seen.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		ok, state, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not after %s; last seen: %s", what, timeout, last)
		case <-tick.C:
		}
	}
}

func (e *environment) startEtcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	p, err := e.spawn("etcd", "etcd", []string{
		"--name=e2e", "--data-dir=" + e.path("etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
	}, nil)
	if err != nil {
		return err
	}
	e.etcdURL = client
	return poll(context.Background(), 30*time.Second, "etcd health", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		out, err := plainGet(client + "/health")
		return err == nil && strings.Contains(out, `"true"`), fmt.Sprint(out, err), nil
	})
}

func (e *environment) startAPIServer(pki *pki) error {
	etcd := e.etcdURL
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := e.spawn("kube-apiserver", e.bin("kube-apiserver"), []string{
		"--etcd-servers=" + etcd,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki.serverCert, "--tls-private-key-file=" + pki.serverKey,
		"--client-ca-file=" + pki.caCert,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saPub, "--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}, nil)
	if err != nil {
		return err
	}
	e.apiURL = "https://127.0.0.1:" + strconv.Itoa(port)
	e.kubeconfig = e.path("pki", "admin.kubeconfig")
	if err := writeKubeconfig(e.kubeconfig, e.apiURL, pki); err != nil {
		return err
	}
	kube, err := newKubeClient(e.apiURL, pki)
	if err != nil {
		return err
	}
	e.kube = kube
	return poll(context.Background(), 90*time.Second, "kube-apiserver /readyz", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		code, body, err := kube.raw(context.Background(), "GET", "/readyz", nil, "", nil)
		return err == nil && code == 200, fmt.Sprint(code, " ", string(body), err), nil
	})
}

// startControllerManager runs only the controllers fleetbot's objects need
// on a node-less cluster: without clusterrole-aggregation the admin
// ClusterRole a workspace ServiceAccount is bound to is empty, and without
// namespace and garbage collection a pruned Namespace never goes away.
func (e *environment) startControllerManager(pki *pki) error {
	_, err := e.startControllerManagerOn("kube-controller-manager", e.kubeconfig, pki, e.kube)
	return err
}

// startControllerManagerOn is startControllerManager for the API server of kubeconfig (whose
// certificates are pki, kube its client), logging as name; it returns the process once ready.
func (e *environment) startControllerManagerOn(name, kubeconfig string, pki *pki, kube *kubeClient) (*process, error) {
	p, err := e.spawn(name, e.bin("kube-controller-manager"), []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=clusterrole-aggregation-controller,namespace-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller",
		"--service-account-private-key-file=" + pki.saKey, "--root-ca-file=" + pki.caCert,
		"--use-service-account-credentials=false", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
	}, nil)
	if err != nil {
		return nil, err
	}
	// Ready once the aggregated admin ClusterRole has rules.
	return p, poll(context.Background(), 90*time.Second, name+" aggregating ClusterRole admin", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		obj, err := kube.get(context.Background(), "rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin")
		if err != nil || obj == nil {
			return false, fmt.Sprint(err), nil
		}
		rules, _ := obj["rules"].([]any)
		return len(rules) > 0, fmt.Sprintf("%d rules", len(rules)), nil
	})
}

// fluxLockdownArgs are the flags the lockdown scaffold fleetbot writes into
// flux/flux-system/kustomization.yaml adds to kustomize-controller; the
// bootstrap test checks the Deployment on the cluster carries the same.
var fluxLockdownArgs = []string{"--no-cross-namespace-refs=true", "--no-remote-bases=true", "--default-service-account=default"}

// startGitServer serves the local forge over smart HTTP with fleetbot dev
// git-serve, the way a user lets a cluster's Flux read it.
func (e *environment) startGitServer() error {
	addrFile := e.path("git-serve.addr")
	p, err := e.spawn("git-serve", e.fleetbot, []string{"dev", "git-serve", "--forge", "local:" + e.forge,
		"--listen", "127.0.0.1:0", "--listen-file", addrFile}, nil)
	if err != nil {
		return err
	}
	return poll(context.Background(), 30*time.Second, "fleetbot dev git-serve", func() (bool, string, error) {
		if err := p.exited(); err != nil {
			return false, "", err
		}
		data, err := os.ReadFile(addrFile)
		if errors.Is(err, os.ErrNotExist) {
			return false, "no address yet", nil
		}
		if err != nil {
			return false, "", err
		}
		e.gitURL = "http://" + strings.TrimSpace(string(data))
		return true, "", nil
	})
}
