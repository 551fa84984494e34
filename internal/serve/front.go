package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/ingress"
)

// DefaultJobNice is how much lower than the front's the job process's CPU priority is.
const DefaultJobNice = 10

// Restart pacing of a job process that exits on its own.
const (
	jobRestartMin = time.Second
	jobRestartMax = 30 * time.Second
)

// JobListenerFD is the descriptor the job process finds its loopback listener on (the first of
// exec.Cmd.ExtraFiles): RunJobProcess's fd.
const JobListenerFD = 3

// JobProcess is how serve --job-process starts its job process.
type JobProcess struct {
	// Exe is the binary (default: this one, os.Executable) and Args its arguments: serve with
	// the front's own configuration, made the job process (RunJobProcess on JobListenerFD).
	Exe  string
	Args []string
}

// RunFront runs serve --job-process: this process answers GitHub on cfg.Listener (POST /webhook
// acknowledged by an ingress.Front, GET /healthz) and runs nothing else; the jobs, the queue,
// /readyz, /metrics and /status live in a child process (proc: this binary, serve with the same
// configuration, at a lower CPU priority) on a loopback listener this process holds, so that
// the child can be restarted without losing a connection. On shutdown the front stops
// answering, hands the child what it still holds, then stops the child and waits for it.
func RunFront(ctx context.Context, cfg Config, proc JobProcess) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Listener == nil {
		return errors.New("serve.RunFront: Config.Listener is nil: bind the address serve answers on first")
	}
	jl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("job process listener: %w", err)
	}
	defer jl.Close()
	file, err := jl.(*net.TCPListener).File()
	if err != nil {
		return fmt.Errorf("job process listener: %w", err)
	}
	defer file.Close()
	jobURL := &url.URL{Scheme: "http", Host: jl.Addr().String()}
	front, err := ingress.NewFront(ingress.FrontConfig{Secret: cfg.Secret, MaxBody: cfg.MaxBody, Capacity: cfg.QueueSize,
		JobProcess: jobURL.String(), Logger: log})
	if err != nil {
		return err
	}
	if proc.Exe == "" {
		if proc.Exe, err = os.Executable(); err != nil {
			return fmt.Errorf("finding this binary to start the job process: %w", err)
		}
	}
	jobs := &jobProcess{exe: proc.Exe, args: proc.Args, listener: file, log: log}
	hs := NewHTTPServer(frontRoutes(front, jobURL, log), log, cfg.HTTP)
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Serve(cfg.HTTP.Listener(cfg.Listener)) }()

	fwdCtx, stopForwarding := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); front.Run(fwdCtx) }()
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	go func() { defer wg.Done(); jobs.supervise(superviseCtx) }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-httpDone:
		runErr = fmt.Errorf("serving HTTP: %w", err)
	}
	log.Info("fleetbot serve shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	stopForwarding()
	stopSupervising()
	wg.Wait()
	dctx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), cfg.Grace)
	left := front.Drain(dctx)
	cancelDrain()
	if left > 0 {
		log.Warn("deliveries not handed to the job process before shutdown; the next resync catches up", "count", left)
	}
	jobs.stop(cfg.Grace + 15*time.Second)
	return runErr
}

// frontRoutes are the front's routes: POST /webhook to the front, GET /healthz, and the rest
// proxied to the job process (but its batch route, which is the job process's alone: from the
// public address it does not exist).
func frontRoutes(front *ingress.Front, jobURL *url.URL, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/webhook", front)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(jobURL); r.Out.Host = r.In.Host },
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			log.Warn("job process not answering", "err", err)
			http.Error(w, "fleetbot's job process is starting", http.StatusServiceUnavailable)
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	mux.Handle(ingress.BatchPath, http.NotFoundHandler())
	mux.Handle("/", proxy)
	return mux
}

// jobProcess is the child of serve --job-process that runs the jobs.
type jobProcess struct {
	exe      string
	args     []string
	listener *os.File
	log      *slog.Logger

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exited
}

// supervise starts the job process and starts it again whenever it exits, until ctx is done
// (the process then keeps running: stop ends it).
func (j *jobProcess) supervise(ctx context.Context) {
	backoff := jobRestartMin
	for ctx.Err() == nil {
		started := time.Now()
		done, err := j.start()
		if err != nil {
			j.log.Error("starting the job process", "err", err)
		} else {
			select {
			case <-ctx.Done():
				return
			case <-done:
			}
			if time.Since(started) > jobRestartMax {
				backoff = jobRestartMin // it ran a while: not a crash loop
			}
			j.mu.Lock()
			state := j.cmd.ProcessState
			j.mu.Unlock()
			j.log.Error("job process exited; starting it again", "state", state.String(), "after", backoff.String())
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, jobRestartMax)
	}
}

// start starts the job process and returns a channel closed when it exits.
func (j *jobProcess) start() (<-chan struct{}, error) {
	cmd := exec.Command(j.exe, j.args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{j.listener}
	cmd.SysProcAttr = jobProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	j.log.Info("job process started", "pid", cmd.Process.Pid)
	done := make(chan struct{})
	j.mu.Lock()
	j.cmd, j.done = cmd, done
	j.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return done, nil
}

// stop asks the job process to shut down (SIGTERM: it finishes in-flight jobs within its
// grace) and kills it if it is still running after wait.
func (j *jobProcess) stop(wait time.Duration) {
	j.mu.Lock()
	cmd, done := j.cmd, j.done
	j.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		j.log.Warn("stopping the job process", "err", err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		j.log.Error("job process did not stop; killing it", "pid", cmd.Process.Pid)
		_ = cmd.Process.Kill()
		<-done
	}
}

// RunJobProcess runs serve as the job process of serve --job-process (RunFront): on the
// loopback listener inherited on fd (JobListenerFD; the front holds the public address), at a
// niceness nice higher, taking the front's batches.
func RunJobProcess(ctx context.Context, cfg Config, fd, nice int) error {
	ln, err := jobListener(fd)
	if err != nil {
		return err
	}
	if err := lowerPriority(nice); err != nil && cfg.Logger != nil {
		cfg.Logger.Warn("job process keeps the front's CPU priority", "err", err)
	}
	cfg.JobProcess, cfg.Listener = true, ln
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// jobListener is the job process's loopback listener, inherited from the front on fd.
func jobListener(fd int) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), "job-listener")
	if f == nil {
		return nil, fmt.Errorf("--job-listener-fd %d: no such descriptor", fd)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--job-listener-fd %d: %w (it is set by serve --job-process, not by hand)", fd, err)
	}
	return ln, nil
}
