//go:build !linux

package serve

import "syscall"

// jobProcAttr puts the job process in a process group of its own (a terminal's ^C reaches the
// front, which hands over what it holds before stopping the job process).
func jobProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// lowerPriority raises this process's niceness by inc.
func lowerPriority(inc int) error {
	if inc <= 0 {
		return nil
	}
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return err
	}
	return syscall.Setpriority(syscall.PRIO_PROCESS, 0, min(prio+inc, 19))
}
