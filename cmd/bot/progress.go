package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressThrottle is the least time between two redraws of a bar: a thousand repos a second
// would otherwise redraw a thousand times.
const progressThrottle = 100 * time.Millisecond

// spinInterval is how often a stage of unknown length (loading and rendering the control repo,
// reading the owner) redraws its spinner and elapsed time.
const spinInterval = 200 * time.Millisecond

// fileIsTerminal reports whether w is a terminal (a TTY), the only place progress is drawn.
func fileIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress shows how far a long command is: on stderr, and only while stderr is a terminal (a
// CI log or a pipe gets nothing, so no output changes). A stage of known length is a bar with
// n/N, the rate and the time left; one of unknown length a spinner with the time elapsed. The
// bars are github.com/schollz/progressbar; progress serialises every call to them, and lines
// written through it (log lines, warnings) clear the bar first, so they never share a line.
type progress struct {
	out io.Writer
	on  bool
	// throttle and spin are progressThrottle and spinInterval; tests set 0 (every update
	// redrawn, no spinner goroutine).
	throttle, spin time.Duration

	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	desc  string
	total int
	stop  chan struct{}
	spun  sync.WaitGroup
}

// newProgress draws on out when isTerminal says out is a terminal.
func newProgress(out io.Writer, isTerminal func(io.Writer) bool) *progress {
	if isTerminal == nil {
		isTerminal = fileIsTerminal
	}
	return &progress{out: out, on: isTerminal(out), throttle: progressThrottle, spin: spinInterval}
}

// stage starts a stage, ending the one before: total steps, or -1 when unknown.
func (p *progress) stage(desc string, total int) {
	if p == nil || !p.on {
		return
	}
	p.end()
	p.mu.Lock()
	defer p.mu.Unlock()
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(p.throttle),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetSpinnerChangeInterval(0), // progress redraws it itself, under p.mu
	}
	if total >= 0 {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("repos"), progressbar.OptionSetPredictTime(true))
	} else {
		opts = append(opts, progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(false))
	}
	p.bar, p.desc, p.total = progressbar.NewOptions(total, opts...), desc, total
	_ = p.bar.RenderBlank()
	if total < 0 && p.spin > 0 {
		stop := make(chan struct{})
		p.stop = stop
		p.spun.Go(func() {
			t := time.NewTicker(p.spin)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					p.mu.Lock()
					if p.bar != nil {
						_ = p.bar.Add(1)
					}
					p.mu.Unlock()
				}
			}
		})
	}
}

// set moves the stage to done of total; a new total (a phase of another length) starts a
// stage of that length under the same description.
func (p *progress) set(done, total int) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	same := p.bar != nil && p.total == total
	desc := p.desc
	p.mu.Unlock()
	if !same {
		p.stage(desc, total)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && total >= 0 {
		_ = p.bar.Set(done)
	}
}

// step is reconcile's Step: the run's phase and done of total repos.
func (p *progress) step(phase string, done, total int) {
	if p == nil || !p.on {
		return
	}
	desc := map[string]string{"read": "reading the target repos", "plan": "planning", "apply": "applying"}[phase]
	if desc == "" {
		desc = phase
	}
	p.mu.Lock()
	newStage := p.bar == nil || p.desc != desc || p.total != total
	p.mu.Unlock()
	if newStage {
		p.stage(desc, total)
	}
	p.set(done, total)
}

// end ends the stage: its bar is cleared, so what is written next starts on a clean line.
func (p *progress) end() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.spun.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
	}
}

// Write writes b (a log line, a warning) on its own line: the bar is cleared first and drawn
// again at the next update.
func (p *progress) Write(b []byte) (int, error) {
	if p == nil || !p.on {
		if p == nil {
			return len(b), nil
		}
		return p.out.Write(b)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	return p.out.Write(b)
}
