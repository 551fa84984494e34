package serve

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// jobProcAttr puts the job process in a process group of its own (a terminal's ^C reaches the
// front, which hands over what it holds before stopping the job process) and has the kernel
// send it SIGTERM should the front die without stopping it.
func jobProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// lowerPriority raises the niceness of every thread of this process by inc (Linux keeps a
// niceness per thread; threads started later inherit their creator's). Lowering a priority
// needs no privilege.
func lowerPriority(inc int) error {
	if inc <= 0 {
		return nil
	}
	// The runtime may start a thread while this runs, from one not lowered yet: go over the
	// threads until a pass finds none to lower.
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("lowering the job process's priority: %w", err)
		}
		lowered := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			// The raw getpriority syscall answers 20 - niceness.
			prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
			if err != nil {
				continue // the thread exited
			}
			nice := min(20-prio+inc, 19)
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
				if errors.Is(err, syscall.ESRCH) {
					continue
				}
				return fmt.Errorf("lowering the job process's priority (thread %d to niceness %d): %w", tid, nice, err)
			}
			done[tid] = true
			lowered++
		}
		if lowered == 0 {
			return nil
		}
	}
	return nil
}
