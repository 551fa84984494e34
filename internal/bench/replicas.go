package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// The replicas row of make bench is not measured here: it is the end-to-end test
// TestReplicasSurviveKills (e2e/replicas_test.go: three fleetbot serve replicas on a real
// kube-apiserver's Leases, one killed with SIGKILL every few seconds, the leader included),
// which writes its figures to the file ReplicasEnv names. RunReplicas runs that test and
// reads them; without the e2e tools there is no figure, and the table says so.

// ReplicasEnv names the file TestReplicasSurviveKills writes its figures to (JSON, Replicas).
const ReplicasEnv = "FLEETBOT_E2E_REPLICAS_JSON"

// E2EToolsEnv names the directory of the e2e binaries (kube-apiserver, etcd, Flux; make
// e2e-tools prints it). Without it the e2e tests, and the replicas row, do not run.
const E2EToolsEnv = "FLEETBOT_E2E_TOOLS"

// Replicas are the figures of one run of TestReplicasSurviveKills. Takeover times are wall-clock
// seconds of processes on the machine that ran it; a kill whose takeover no survivor logged
// (the survivor was killed in turn first) counts in NotObserved, not in the times.
type Replicas struct {
	Replicas      int     `json:"replicas"`
	Seconds       float64 `json:"seconds"`
	Kills         int     `json:"kills"`
	LeaderKills   int     `json:"leader_kills"`
	ControlPushes int     `json:"control_pushes"`
	PRUpdates     int     `json:"control_pr_updates"`
	Drifts        int     `json:"drifts"`
	// Share is the time from a kill to the last survivor's view without the dead replica
	// (its share of the repos taken over); Lead, for a leader's kill, to a survivor seeing
	// another leader.
	Share       Spread `json:"share_takeover"`
	Lead        Spread `json:"lead_takeover"`
	NotObserved int    `json:"not_observed"`
	// LostChecks: open control pull request heads without a completed fleetbot check run when
	// the wait for recovery ended; Converged: fleetbot plan found nothing left to do.
	LostChecks int `json:"lost_checks"`
	// RecoveredChecks: check jobs the replicas' resyncs queued for a head without a completed
	// check (its delivery or its job died with a replica; a run stuck in_progress).
	RecoveredChecks int  `json:"recovered_checks"`
	Converged       bool `json:"converged"`
	OpenControlPRs  int  `json:"open_control_prs"`
	// StaleMoves: bot-branch moves that did not name the head they replaced; DuplicatePRs:
	// open pull requests beyond one per target repo.
	StaleMoves   int `json:"stale_ref_moves"`
	DuplicatePRs int `json:"duplicate_prs"`
	// Wall is how long the whole test took (set by RunReplicas).
	Wall time.Duration `json:"wall_ns,omitempty"`
}

// LostWork is the work a run lost: control pull request heads left without a completed check,
// and one for a fleet that did not converge.
func (r *Replicas) LostWork() int {
	n := r.LostChecks
	if !r.Converged {
		n++
	}
	return n
}

// Spread is the minimum, median and maximum of N durations, in seconds.
type Spread struct {
	N      int     `json:"n"`
	Min    float64 `json:"min_s"`
	Median float64 `json:"median_s"`
	Max    float64 `json:"max_s"`
}

// SpreadOf is the spread of ds, each rounded to 0.1 s (zero when there is none).
func SpreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	sec := func(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }
	return Spread{N: len(s), Min: sec(s[0]), Median: sec(med), Max: sec(s[len(s)-1])}
}

// ReplicasOptions say how to run the replicas test.
type ReplicasOptions struct {
	// Go is the go command (default "go"); Root the module's root directory (default ".").
	Go, Root string
	// Tools is the e2e tools directory (E2EToolsEnv); required.
	Tools string
	// Work is a directory for the figures file (default: a temporary one).
	Work string
	// Log receives the test's output (go test -v); may be nil.
	Log io.Writer
}

// RunReplicas runs TestReplicasSurviveKills and returns its figures. A failed test is an error
// (with its figures when it wrote them: a run that lost work fails its assertions).
func RunReplicas(ctx context.Context, o ReplicasOptions) (*Replicas, error) {
	if o.Tools == "" {
		return nil, fmt.Errorf("the replicas end-to-end test needs the e2e tools: set %s (make e2e-tools prints the directory)", E2EToolsEnv)
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Root == "" {
		o.Root = "."
	}
	work := o.Work
	if work == "" {
		tmp, err := os.MkdirTemp("", "fleetbot-replicas-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	out := filepath.Join(work, "replicas.json")
	_ = os.Remove(out)
	cmd := exec.CommandContext(ctx, o.Go, "test", "-count=1", "-timeout", "30m", "-v", "-run", "^TestReplicasSurviveKills$", "./e2e/")
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), E2EToolsEnv+"="+o.Tools, ReplicasEnv+"="+out)
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	runErr := cmd.Run()
	var fig Replicas
	b, readErr := os.ReadFile(out)
	if readErr == nil {
		readErr = json.Unmarshal(b, &fig)
	}
	fig.Wall = time.Since(start)
	switch {
	case runErr != nil && readErr == nil:
		return &fig, fmt.Errorf("TestReplicasSurviveKills failed (its figures were written): %w", runErr)
	case runErr != nil:
		return nil, fmt.Errorf("TestReplicasSurviveKills failed before writing its figures: %w", runErr)
	case errors.Is(readErr, os.ErrNotExist):
		return nil, fmt.Errorf("TestReplicasSurviveKills passed but wrote no figures to %s: did it run (skipped without the e2e tools)?", out)
	case readErr != nil:
		return nil, fmt.Errorf("reading the figures of TestReplicasSurviveKills from %s: %w", out, readErr)
	}
	return &fig, nil
}
