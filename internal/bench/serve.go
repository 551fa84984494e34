package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	gh "github.com/google/go-github/v62/github"
)

// ServeOptions shape the measurement of the real `fleetbot serve` binary.
type ServeOptions struct {
	// Binary is the fleetbot binary to run (built from the commit being measured).
	Binary string
	// Clusters and Apps size the generated control repo.
	Clusters, Apps int
	// Rate is deliveries per second, sent for Duration.
	Rate     int
	Duration time.Duration
	// Work is a directory for the fake GitHub, serve's state and logs.
	Work string
	// Sender sends the load (nil: SendLoad in this process). cmd/benchtable runs it in a
	// process of its own, so that the sender's timing does not wait behind the fake GitHub's
	// goroutines in this process's scheduler.
	Sender func(ctx context.Context, spec LoadSpec) (*LoadResult, error)
	// LogLevel is serve's --log-level (default warn; its log is serve.log in Work).
	LogLevel string
	// JobProcess runs serve --job-process: jobs in a child process at a lower CPU priority.
	JobProcess bool
}

// LoadSpec is the open-loop load the sender sends: Deliveries at Rate per second to URL,
// signed with Secret.
type LoadSpec struct {
	URL, Secret string
	Rate        int
	Deliveries  []Delivery
}

// Delivery is one webhook delivery to send.
type Delivery struct {
	Event string
	Body  []byte
}

// LoadResult is what the sender measured, per delivery in LoadSpec order: the latency from
// writing the request to reading the response headers, the HTTP status (0 when the request
// failed), and how late the request started against its schedule. CPU is the sender
// process's CPU time during the load, Wall the load's duration.
type LoadResult struct {
	Latency, Lag []time.Duration
	Status       []int
	Wall, CPU    time.Duration
	// Nice is the sender's scheduling niceness (0: the machine's default; negative: raised,
	// see cmd/benchtable).
	Nice int
}

// PushResult is one push of a one-cluster change to the control repo, from the delivery sent
// to the apply job finished, as the fake GitHub saw it.
type PushResult struct {
	Wall time.Duration
	// Touched are the target repos the job sent any request about.
	Touched []string
	// TargetReads and TargetWrites are requests about target repos; OrgReads the org-level
	// ones (teams, the scan); ControlReads those reading the control repo (head, tree, the
	// changed blobs).
	TargetReads, TargetWrites, OrgReads, ControlReads int
}

// ServeResult is the real `fleetbot serve` under measurement.
type ServeResult struct {
	Clusters, Repos int
	// Startup is from exec to the startup resync finished (every repo created, PRs opened).
	Startup time.Duration
	// Push is a one-cluster change pushed to the warm service.
	Push PushResult
	// Rate, Deliveries, P50, P99, Max, Statuses: deliveries sent open-loop at Rate per second
	// and their acknowledgement latency (request written to response headers read).
	Rate, Deliveries int
	P50, P99, Max    time.Duration
	Statuses         map[int]int
	// ServerP50 and ServerP99 are the same deliveries' acknowledgement time as serve measures
	// it (fleetbot_webhook_ack_seconds: from its handler reading the headers to the answer
	// written), over the load: the upper bound of the histogram bucket holding the percentile.
	// The gap to P50 and P99 is what happens outside the handler: connection handling, the
	// kernel, and waiting for a CPU, in serve and in this process alike.
	ServerP50, ServerP99 time.Duration
	// SendLagP99 and SendLagMax are how late the sender started requests against their
	// schedule: large values mean the sender could not keep the rate (its latencies then
	// count from the late start, not the schedule).
	SendLagP99, SendLagMax time.Duration
	// LoadWall is the load's duration, first send to last answer. ServeCPU, SenderCPU and
	// FakeCPU are the CPU time (user + system) used meanwhile by serve (/proc), by the sender
	// (its process when ServeOptions.Sender runs one) and by this process (the fake GitHub
	// answering serve's jobs and the metrics sampler; the sender too when it runs here): all
	// share the machine's CPUs, with whatever else runs on it.
	LoadWall, ServeCPU, SenderCPU, FakeCPU time.Duration
	// SenderNice is the sender's scheduling niceness (LoadResult.Nice).
	SenderNice int
	// QueueMax is the deepest the queue was during the load (serve's fleetbot_queue_depth_max,
	// and samples of fleetbot_queue_depth every 20 ms), of QueueSize.
	QueueMax, QueueSize int
	// Workers is serve's --workers (its default).
	Workers int
	// JobProcess: serve ran with --job-process; FrontMax is then the most deliveries its front
	// held for the job process (sampled with QueueMax).
	JobProcess bool
	FrontMax   int
	// Jobs counts finished jobs by kind and outcome from /metrics, during the load.
	Jobs map[string]int
	// Ignored is the deliveries that needed no work (fleetbot's own events).
	Ignored int
	// PeakRSS is serve's VmHWM at the end.
	PeakRSS int64
	// LoadRequests counts the requests serve's jobs made to the fake GitHub from the first
	// delivery of the load until every job finished, by route ("POST /graphql", ...).
	LoadRequests map[string]int
}

// Serve runs the real fleetbot binary as `fleetbot serve` against a fake GitHub (in this
// process, over loopback HTTP) holding a generated control repo, waits for its startup resync,
// measures one pushed one-cluster change end to end, then sends signed deliveries open-loop
// at o.Rate per second over HTTP and measures acknowledgement latency and queue depth.
func Serve(ctx context.Context, o ServeOptions) (*ServeResult, error) {
	files := fleetgen.Generate(fleetgen.Options{Clusters: o.Clusters, Apps: o.Apps, Seed: 1})
	repo, err := control.Load(files)
	if err != nil {
		return nil, err
	}
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	if err != nil {
		return nil, err
	}
	res := &ServeResult{Clusters: o.Clusters, Repos: len(targets), Rate: o.Rate, QueueSize: jobqueue.DefaultQueueSize, Workers: jobqueue.DefaultWorkers, Statuses: map[int]int{}, Jobs: map[string]int{}}
	srv, stop, err := fakeGitHub(o.Work, repo)
	if err != nil {
		return nil, err
	}
	defer stop()
	owner := repo.Platform.Spec.Owner
	ctl := map[string]string{}
	for p, f := range files {
		ctl[p] = string(f.Data)
	}
	srv.CreateRepo(owner, "control", ctl)

	secret := "bench-secret"
	secretFile, keyFile := filepath.Join(o.Work, "secret"), filepath.Join(o.Work, "app.pem")
	listenFile, logFile := filepath.Join(o.Work, "listen"), filepath.Join(o.Work, "serve.log")
	// A listen file left by an earlier run names a dead address: waiting on it never ends.
	if err := os.Remove(listenFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, srv.AppPrivateKeyPEM(), 0o600); err != nil {
		return nil, err
	}
	logOut, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logOut.Close()
	start := time.Now()
	cmd := exec.CommandContext(ctx, o.Binary, "serve", "--control-repo", owner+"/control", "--webhook-secret-file", secretFile,
		"--listen", "127.0.0.1:0", "--listen-file", listenFile, "--github-cache", filepath.Join(o.Work, "cache"),
		"--git-url", srv.URL, "--resync-interval", "24h", "--log-level", cmp.Or(o.LogLevel, "warn"),
		// The startup resync creates every repo: no content budget for the setup, and no second
		// between mutations (GitHub's guidance, serve's default): 1,000 new repos at ~14 writes
		// each would take about 4 hours. The one-cluster push is measured the same way; the
		// table says what the default spacing adds.
		"--content-per-minute", "100000000", "--content-per-hour", "1000000000", "--mutation-interval", "0")
	if o.JobProcess {
		cmd.Args = append(cmd.Args, "--job-process")
	}
	cmd.Env = append(os.Environ(), "GITHUB_API_URL="+srv.APIURL(), "FLEETBOT_APP_ID="+strconv.FormatInt(srv.AppID(), 10),
		"FLEETBOT_APP_KEY_FILE="+keyFile, "GITHUB_TOKEN=", "FLEETBOT_APP_KEY=")
	cmd.Stdout, cmd.Stderr = logOut, logOut
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", o.Binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(err error) (*ServeResult, error) {
		tail, _ := os.ReadFile(logFile)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return nil, fmt.Errorf("%w\nserve log (end):\n%s", err, tail)
	}
	var base string
	if err := poll(ctx, 60*time.Second, exited, func() (bool, error) {
		b, err := os.ReadFile(listenFile)
		if err != nil {
			return false, nil
		}
		base = "http://" + strings.TrimSpace(string(b))
		return strings.HasSuffix(string(b), "\n"), nil
	}); err != nil {
		return fail(fmt.Errorf("serve did not listen: %w", err))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}, Timeout: 30 * time.Second}
	m := &serveMetrics{client: client, url: base + "/metrics"}
	applied := func() (float64, error) {
		return m.value(`fleetbot_job_duration_seconds_count{kind="apply",outcome="ok"}`)
	}
	if err := poll(ctx, time.Hour, exited, func() (bool, error) {
		n, err := applied()
		return n >= 1, err
	}); err != nil {
		return fail(fmt.Errorf("startup resync: %w", err))
	}
	if err := m.idle(ctx, exited); err != nil {
		return fail(err)
	}
	res.Startup = time.Since(start)

	// One cluster's change pushed: a warm-up on one cluster, then the measured one on another.
	var metal []string
	for p, f := range files {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), ".0/24") {
			metal = append(metal, p)
		}
	}
	slices.Sort(metal)
	if len(metal) < 2 {
		return nil, errors.New("the generated fleet has fewer than 2 clusters with an address range")
	}
	send := func(event string, body []byte, id string) (int, time.Duration, error) {
		return sendSigned(ctx, client, base+"/webhook", secret, event, body, id)
	}
	for i, file := range metal[:2] {
		content := strings.Replace(ctl[file], ".0/24", ".0/25", 1)
		ctl[file] = content
		sha := srv.Commit(owner, "control", "main", "bench: "+file, map[string]string{file: content})
		before, err := applied()
		if err != nil {
			return fail(err)
		}
		srv.ResetLog()
		t0 := time.Now()
		body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":%q,"repository":{"full_name":"%s/control","default_branch":"main"},"sender":{"login":"bob"}}`, sha, owner)
		if code, _, err := send("push", body, fmt.Sprintf("push-%d", i)); err != nil || code != http.StatusAccepted {
			return fail(fmt.Errorf("push delivery: %d %v", code, err))
		}
		// Scraping /metrics every 2 ms costs serve CPU while it works: ask serve only once the
		// fake saw the job's first write to a target repo (after its load, render and plan),
		// and the fake meanwhile, in process.
		if err := poll(ctx, time.Minute, exited, func() (bool, error) {
			if !wroteTarget(srv.Requests(), owner) {
				return false, nil
			}
			n, err := applied()
			return n > before, err
		}); err != nil {
			return fail(fmt.Errorf("push apply: %w", err))
		}
		res.Push = pushCost(srv.Requests(), owner)
		res.Push.Wall = time.Since(t0)
	}

	// Deliveries at o.Rate, open-loop, over HTTP, spread over the real target repos.
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.FullName()
	}
	jobsBefore, err := m.jobs()
	if err != nil {
		return fail(err)
	}
	n := int(float64(o.Rate) * o.Duration.Seconds())
	// The control repo's commits the load names: a pull request with its heads, then pushes to
	// main, each changing one more cluster's address range (a few more than the load is
	// expected to name; beyond them a delivery names the newest again).
	want := n*loadControlPerMille/1000*3/2 + 2
	if len(metal) < 2+2*want {
		return nil, fmt.Errorf("the generated fleet has %d clusters with an address range, the load needs %d", len(metal), 2+2*want)
	}
	ctlEvents, err := controlCommits(ctx, srv, owner, ctl, metal[2:], want)
	if err != nil {
		return fail(err)
	}
	evs := deliveries(n, names, ctlEvents, rand.New(rand.NewPCG(7, 7)))
	var qmax, fmax atomic.Int64
	deepestBefore, err := m.value("fleetbot_queue_depth_max")
	if err != nil {
		return fail(err)
	}
	ackBefore, err := m.ackHistogram()
	if err != nil {
		return fail(err)
	}
	sampling, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for sampling.Err() == nil {
			if all, err := m.scrape(); err == nil {
				if q := int64(all["fleetbot_queue_depth"]); q > qmax.Load() {
					qmax.Store(q)
				}
				if q := int64(all["fleetbot_webhook_front_buffered"]); q > fmax.Load() {
					fmax.Store(q)
				}
			}
			select {
			case <-sampling.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	sender := o.Sender
	if sender == nil {
		sender = SendLoad
	}
	srv.ResetLog()
	serveCPU0, selfCPU0 := treeCPU(cmd.Process.Pid), selfCPU()
	load, loadErr := sender(ctx, LoadSpec{URL: base + "/webhook", Secret: secret, Rate: o.Rate, Deliveries: evs})
	res.ServeCPU, res.FakeCPU = treeCPU(cmd.Process.Pid)-serveCPU0, selfCPU()-selfCPU0
	ackAfter, ackErr := m.ackHistogram()
	if loadErr == nil {
		if len(load.Latency) != n || len(load.Lag) != n || len(load.Status) != n {
			loadErr = fmt.Errorf("the sender answered for %d of %d deliveries", len(load.Latency), n)
		} else {
			res.LoadWall, res.SenderCPU, res.SenderNice = load.Wall, load.CPU, load.Nice
		}
	}
	if loadErr != nil {
		stopSampling()
		sampler.Wait()
		return fail(fmt.Errorf("sending the load: %w", loadErr))
	}
	res.ServerP50, res.ServerP99 = ackAfter.sub(ackBefore).quantile(0.50), ackAfter.sub(ackBefore).quantile(0.99)
	lag := slices.Clone(load.Lag)
	slices.Sort(lag)
	res.SendLagP99, res.SendLagMax = lag[n*99/100], lag[n-1]
	if err := m.idle(ctx, exited); err != nil {
		stopSampling()
		sampler.Wait()
		return fail(err)
	}
	stopSampling()
	sampler.Wait()
	if ackErr != nil {
		return fail(ackErr)
	}
	if failed := n - len(slices.DeleteFunc(slices.Clone(load.Status), func(code int) bool { return code == 0 })); failed > 0 {
		return fail(fmt.Errorf("%d of %d deliveries failed", failed, n))
	}
	res.LoadRequests = map[string]int{}
	for _, r := range srv.Requests() {
		res.LoadRequests[cmp.Or(r.Route, r.Method+" "+r.Path)]++
	}
	jobsAfter, err := m.jobs()
	if err != nil {
		return fail(err)
	}
	for k, v := range jobsAfter {
		if d := v - jobsBefore[k]; d > 0 {
			res.Jobs[k] = d
		}
	}
	// serve's own high-water mark is exact; the samples miss peaks between scrapes.
	deepest, err := m.value("fleetbot_queue_depth_max")
	if err != nil {
		return fail(err)
	}
	if deepest > deepestBefore {
		qmax.Store(max(qmax.Load(), int64(deepest)))
	}
	res.QueueMax, res.FrontMax, res.JobProcess, res.Deliveries = int(qmax.Load()), int(fmax.Load()), o.JobProcess, n
	for _, s := range load.Status {
		res.Statuses[s]++
	}
	for _, ev := range evs {
		if bytes.Contains(ev.Body, []byte(`"fleetbot[bot]"`)) {
			res.Ignored++
		}
	}
	lat := slices.Clone(load.Latency)
	slices.Sort(lat)
	res.P50, res.P99, res.Max = lat[n/2], lat[n*99/100], lat[n-1]
	for _, pid := range processTree(cmd.Process.Pid) {
		res.PeakRSS += vmHWM(pid)
	}
	return res, nil
}

// SendLoad sends spec's deliveries open-loop, each at its scheduled time in its own goroutine,
// and measures them. It is a lean HTTP/1.1 client, as a load generator (wrk) is: every request
// is built and signed before the load (GitHub signs a delivery before sending it), sent as
// bytes on a kept-alive connection (a new one when all are busy) and its answer read with
// http.ReadResponse; net/http's client cost the sender a quarter of a CPU at 1,000 deliveries
// a second, on the CPUs serve needs.
func SendLoad(ctx context.Context, spec LoadSpec) (*LoadResult, error) {
	if spec.Rate <= 0 {
		return nil, fmt.Errorf("load rate %d: want deliveries per second", spec.Rate)
	}
	u, err := url.Parse(spec.URL)
	if err != nil {
		return nil, fmt.Errorf("load URL %q: %w", spec.URL, err)
	}
	n := len(spec.Deliveries)
	reqs := make([][]byte, n)
	for i, ev := range spec.Deliveries {
		reqs[i] = signedRequest(u, spec.Secret, ev.Event, ev.Body, fmt.Sprintf("load-%d", i))
	}
	res := &LoadResult{Latency: make([]time.Duration, n), Lag: make([]time.Duration, n), Status: make([]int, n)}
	conns := &connPool{addr: u.Host}
	defer conns.close()
	cpu0 := selfCPU()
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(spec.Rate)
	t0 := time.Now()
	for i := range reqs {
		due := t0.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.Lag[i] = max(0, time.Since(due))
			code, d, err := conns.roundTrip(reqs[i])
			res.Latency[i] = d
			if err == nil {
				res.Status[i] = code
			}
		}()
	}
	wg.Wait()
	res.Wall, res.CPU = time.Since(t0), selfCPU()-cpu0
	return res, ctx.Err()
}

// signedRequest is the bytes of one delivery's HTTP/1.1 request to u, signed with secret.
func signedRequest(u *url.URL, secret, event string, body []byte, id string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: %s\r\n"+
		"X-GitHub-Delivery: %s\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n",
		u.RequestURI(), u.Host, event, id, hex.EncodeToString(mac.Sum(nil)), len(body))
	b.Write(body)
	return b.Bytes()
}

// connPool keeps the sender's idle keep-alive connections.
type connPool struct {
	addr string
	mu   sync.Mutex
	idle []*loadConn
	all  []*loadConn
}

type loadConn struct {
	c net.Conn
	r *bufio.Reader
}

// roundTrip writes req on an idle connection (a new one if none is idle) and reads the answer;
// the time is from writing the request to reading the response headers.
func (p *connPool) roundTrip(req []byte) (int, time.Duration, error) {
	c, err := p.get()
	if err != nil {
		return 0, 0, err
	}
	t := time.Now()
	if _, err := c.c.Write(req); err != nil {
		_ = c.c.Close()
		return 0, time.Since(t), err
	}
	resp, err := http.ReadResponse(c.r, nil)
	d := time.Since(t)
	if err != nil {
		_ = c.c.Close()
		return 0, d, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.Close {
		_ = c.c.Close()
	} else {
		p.put(c)
	}
	return resp.StatusCode, d, nil
}

func (p *connPool) get() (*loadConn, error) {
	p.mu.Lock()
	if k := len(p.idle); k > 0 {
		c := p.idle[k-1]
		p.idle = p.idle[:k-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &loadConn{c: nc, r: bufio.NewReader(nc)}
	p.mu.Lock()
	p.all = append(p.all, c)
	p.mu.Unlock()
	return c, nil
}

func (p *connPool) put(c *loadConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, c)
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		_ = c.c.Close()
	}
}

// sendSigned posts one delivery signed with secret and returns its status and the time from
// writing the request to reading the response headers.
func sendSigned(ctx context.Context, client *http.Client, url, secret, event string, body []byte, id string) (int, time.Duration, error) {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	t := time.Now()
	resp, err := client.Do(req)
	d := time.Since(t)
	if err != nil {
		return 0, d, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, d, nil
}

// wroteTarget reports whether the fake's request log holds a write to a repo of owner other
// than the control repo.
func wroteTarget(reqs []githubtest.Request, owner string) bool {
	prefix := "/api/v3/repos/" + owner + "/"
	for _, r := range reqs {
		if r.Class != githubtest.Read && strings.HasPrefix(r.Path, prefix) && !strings.HasPrefix(r.Path, prefix+"control/") {
			return true
		}
	}
	return false
}

// pushCost classifies the fake's request log of one push.
func pushCost(reqs []githubtest.Request, owner string) PushResult {
	var p PushResult
	touched := map[string]bool{}
	for _, r := range reqs {
		switch {
		case strings.HasPrefix(r.Route, "POST /app/") || r.Route == "GET /app":
		case strings.HasPrefix(r.Path, "/api/v3/repos/"+owner+"/control/") || r.Path == "/api/v3/repos/"+owner+"/control":
			p.ControlReads++
		case strings.HasPrefix(r.Path, "/api/v3/repos/"+owner+"/") || strings.HasPrefix(r.Path, "/"+owner+"/"):
			// A REST path of a target repo, or its git smart HTTP (a push: the ref
			// advertisement, then the receive-pack).
			rest := strings.TrimPrefix(strings.TrimPrefix(r.Path, "/api/v3/repos/"+owner+"/"), "/"+owner+"/")
			name, _, _ := strings.Cut(rest, "/")
			name = strings.TrimSuffix(name, ".git")
			touched[name] = true
			if r.Class == githubtest.Read {
				p.TargetReads++
			} else {
				p.TargetWrites++
			}
		case r.Class == githubtest.Read:
			p.OrgReads++
		default:
			p.TargetWrites++
		}
	}
	for t := range touched {
		p.Touched = append(p.Touched, t)
	}
	slices.Sort(p.Touched)
	return p
}

// poll calls cond until it is true, the process exits, ctx ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, exited <-chan error, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s (last error: %v)", timeout, err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("serve exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// serveMetrics reads serve's /metrics.
type serveMetrics struct {
	client *http.Client
	url    string
}

func (m *serveMetrics) scrape() (map[string]float64, error) {
	resp, err := m.client.Get(m.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

func (m *serveMetrics) value(series string) (float64, error) {
	all, err := m.scrape()
	if err != nil {
		return 0, err
	}
	return all[series], nil
}

// histogram is a Prometheus histogram's cumulative bucket counts by upper bound (seconds,
// +Inf last), sorted by bound.
type histogram struct {
	bounds []float64
	counts []float64
}

// ackHistogram reads serve's fleetbot_webhook_ack_seconds.
func (m *serveMetrics) ackHistogram() (histogram, error) {
	all, err := m.scrape()
	if err != nil {
		return histogram{}, err
	}
	type bucket struct{ bound, count float64 }
	var bs []bucket
	const prefix = `fleetbot_webhook_ack_seconds_bucket{le="`
	for k, v := range all {
		le, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		b, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64) // "+Inf" parses as +Inf
		if err != nil {
			return histogram{}, fmt.Errorf("metrics: bucket %s: %w", k, err)
		}
		bs = append(bs, bucket{b, v})
	}
	if len(bs) == 0 {
		return histogram{}, errors.New("metrics: serve has no fleetbot_webhook_ack_seconds histogram")
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.bound, b.bound) })
	var h histogram
	for _, b := range bs {
		h.bounds, h.counts = append(h.bounds, b.bound), append(h.counts, b.count)
	}
	return h, nil
}

// sub is the histogram of the observations made between old and h.
func (h histogram) sub(old histogram) histogram {
	out := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	if len(old.counts) == len(h.counts) {
		for i := range out.counts {
			out.counts[i] -= old.counts[i]
		}
	}
	return out
}

// quantile is the upper bound of the bucket holding quantile q (0 when empty; the largest
// finite bound doubled when q falls in +Inf, to show it is beyond every bucket).
func (h histogram) quantile(q float64) time.Duration {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return 0
	}
	rank := q * h.counts[len(h.counts)-1]
	for i, c := range h.counts {
		if c >= rank {
			b := h.bounds[i]
			if math.IsInf(b, 1) {
				b = 2 * h.bounds[max(0, i-1)]
			}
			return time.Duration(b * float64(time.Second))
		}
	}
	return 0
}

// processTree is pid and its descendants (serve --job-process has a child), from
// /proc/PID/task/TID/children.
func processTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// treeCPU is the CPU time of pid and its descendants so far.
func treeCPU(pid int) time.Duration {
	var sum time.Duration
	for _, p := range processTree(pid) {
		sum += procCPU(p)
	}
	return sum
}

// procCPU is the user + system CPU time of process pid so far, 0 when unknown (/proc/pid/stat
// counts clock ticks; Linux's USER_HZ is 100).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// selfCPU is this process's user + system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// jobs returns the finished jobs by "kind outcome".
func (m *serveMetrics) jobs() (map[string]int, error) {
	all, err := m.scrape()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for k, v := range all {
		rest, ok := strings.CutPrefix(k, "fleetbot_job_duration_seconds_count{")
		if !ok {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if name, val, ok := strings.Cut(kv, "="); ok {
				labels[name] = strings.Trim(val, `"`)
			}
		}
		out[labels["kind"]+" "+labels["outcome"]] += int(v)
	}
	return out, nil
}

// idle waits until no job waits or runs.
func (m *serveMetrics) idle(ctx context.Context, exited <-chan error) error {
	return poll(ctx, 10*time.Minute, exited, func() (bool, error) {
		all, err := m.scrape()
		if err != nil {
			return false, err
		}
		return all["fleetbot_queue_depth"] == 0 && all["fleetbot_jobs_in_flight"] == 0 && all["fleetbot_webhook_front_buffered"] == 0, nil
	})
}

// vmHWM is a process's peak resident set size, 0 when unknown.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// controlCommits makes the control repo's commits of the load: a branch bench-pr off main with
// want commits and its pull request, then want commits on main, each changing one cluster of
// files (ctl holds the current contents).
func controlCommits(ctx context.Context, srv *githubtest.Server, owner string, ctl map[string]string, files []string, want int) (*controlEvents, error) {
	ev := &controlEvents{Repo: owner + "/control", Author: githubtest.DefaultUser, Base: srv.Branch(owner, "control", "main")}
	client := srv.Client()
	if _, _, err := client.Git.CreateRef(ctx, owner, "control", &gh.Reference{
		Ref: gh.String("refs/heads/bench-pr"), Object: &gh.GitObject{SHA: gh.String(ev.Base)},
	}); err != nil {
		return nil, fmt.Errorf("creating the pull request's branch: %w", err)
	}
	change := func(branch, file string) string {
		content := strings.Replace(ctl[file], ".0/24", ".0/25", 1)
		if branch == "main" {
			ctl[file] = content
		}
		return srv.Commit(owner, "control", branch, "bench: "+file, map[string]string{file: content})
	}
	for _, file := range files[:want] {
		ev.Heads = append(ev.Heads, change("bench-pr", file))
	}
	pr, _, err := client.PullRequests.Create(ctx, owner, "control", &gh.NewPullRequest{
		Title: gh.String("bench: address ranges"), Head: gh.String("bench-pr"), Base: gh.String("main"),
	})
	if err != nil {
		return nil, fmt.Errorf("opening the pull request: %w", err)
	}
	ev.PR = pr.GetNumber()
	ev.Before = ev.Base
	for _, file := range files[want : 2*want] {
		ev.Pushes = append(ev.Pushes, change("main", file))
	}
	return ev, nil
}

// controlEvents are the control repo's real commits the load's control deliveries name: pushes
// to the default branch (Pushes, oldest first) and updates of one pull request (PR, its base
// and its successive heads). Every SHA exists on the fake GitHub, so each delivery's job does
// the work it would do for GitHub's event (an apply of the pushed head, a check of the pushed
// pull request head) instead of failing on an unknown commit.
type controlEvents struct {
	Repo string
	// Before is the default branch's head before Pushes; Pushes are its later commits.
	Before string
	Pushes []string
	// PR is the pull request's number, Author its author, Base its base commit and Heads its
	// head commits, oldest first.
	PR           int
	Author, Base string
	Heads        []string

	pushN, prN int
}

// push returns the next control push's body (the newest commit again once they are used up,
// as a redelivery).
func (c *controlEvents) push() []byte {
	i := min(c.pushN, len(c.Pushes)-1)
	before := c.Before
	if i > 0 {
		before = c.Pushes[i-1]
	}
	c.pushN++
	return fmt.Appendf(nil, `{"ref":"refs/heads/main","before":%q,"after":%q,"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"bob"}}`, before, c.Pushes[i], c.Repo)
}

// synchronize returns the next pull request update's body.
func (c *controlEvents) synchronize() []byte {
	i := min(c.prN, len(c.Heads)-1)
	c.prN++
	return fmt.Appendf(nil, `{"action":"synchronize","number":%d,"pull_request":{"number":%d,"head":{"sha":%q,"ref":"bench-pr"},"base":{"sha":%q,"ref":"main"},"user":{"login":%q}},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":%q}}`,
		c.PR, c.PR, c.Heads[i], c.Base, c.Author, c.Repo, c.Author)
}

// Shares of the load, per mille: at 1,000 deliveries a second the stream is a fan-out in
// progress, so nearly all of it is about target repos (humans merging fleetbot's pull requests,
// pushes, Flux reporting health, fleetbot's own events echoed back); the control repo changes at
// human speed. loadControlPerMille of each kind is still one a second, far above what a platform
// team pushes.
const (
	loadMergedPerMille  = 400 // pull_request closed (merged) on a target repo: drift
	loadPushPerMille    = 300 // push to a target repo's default branch: drift
	loadStatusPerMille  = 135 // Flux commit status on a target repo: no rollout in progress, ignored
	loadControlPerMille = 1   // each of: a push to the control repo, a control pull request update
	// the rest, 163: fleetbot's own events (ignored)
)

// deliveries returns a realistic stream during a busy fan-out (see the shares above). The
// target-repo deliveries name random commits (a drift job reads the repo's state whatever the
// event says); the control repo's name real ones (ctl).
func deliveries(n int, repos []string, ctl *controlEvents, rng *rand.Rand) []Delivery {
	out := make([]Delivery, n)
	for i := range out {
		target := repos[rng.IntN(len(repos))]
		switch r := rng.IntN(1000); {
		case r < loadMergedPerMille:
			out[i] = Delivery{"pull_request", fmt.Appendf(nil, `{"action":"closed","number":%d,"pull_request":{"number":%d,"merged":true},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"alice"}}`, 1+i%7, 1+i%7, target)}
		case r < loadMergedPerMille+loadPushPerMille:
			out[i] = Delivery{"push", fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%040x","repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"alice"}}`, i, target)}
		case r < loadMergedPerMille+loadPushPerMille+loadStatusPerMille:
			out[i] = Delivery{"status", fmt.Appendf(nil, `{"sha":"%040x","state":"success","context":"kustomization/flux-system/apps","description":"ReconciliationSucceeded","repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"flux-bot"}}`, i, target)}
		case r < loadMergedPerMille+loadPushPerMille+loadStatusPerMille+loadControlPerMille:
			out[i] = Delivery{"push", ctl.push()}
		case r < loadMergedPerMille+loadPushPerMille+loadStatusPerMille+2*loadControlPerMille:
			out[i] = Delivery{"pull_request", ctl.synchronize()}
		default:
			out[i] = Delivery{"pull_request", fmt.Appendf(nil, `{"action":"opened","number":1,"pull_request":{"number":1},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"fleetbot[bot]"}}`, target)}
		}
	}
	return out
}
