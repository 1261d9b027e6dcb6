//go:build !linux

package runner

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// procAttr puts terraform in its own process group (see proc_linux.go).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

var privsWarning sync.Once

// start starts cmd, and returns what waits for it (cmd.Wait). Only
// Linux keeps terraform from gaining privileges (proc_linux.go):
// elsewhere the runner's log says so, once.
func (j *jobExec) start(cmd *exec.Cmd) (wait func() error, err error) {
	if j.noNewPrivs {
		privsWarning.Do(func() {
			j.log.Warn("this runner cannot keep terraform from gaining privileges (sudo) on " + runtime.GOOS + ": runs of organizations that do not allow sudo run as any other")
		})
	}
	return cmd.Wait, cmd.Start()
}

// StartCommand starts cmd; only Linux keeps it from gaining privileges
// (proc_linux.go).
func StartCommand(cmd *exec.Cmd, _ bool) (wait func() error, err error) {
	return cmd.Wait, cmd.Start()
}
