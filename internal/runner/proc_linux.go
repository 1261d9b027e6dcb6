package runner

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts terraform in its own process group (so that a cancel can
// kill it and its provisioners together) and, on Linux, has the kernel
// kill it when the server dies. Without that a server killed mid-apply
// leaves terraform running on: it keeps changing resources while the
// restarted server reports the run errored, and the state it writes is
// never collected. SIGKILL rather than SIGTERM: a graceful stop gains
// nothing (nobody uploads the state it saves) and terraform dies of
// SIGPIPE anyway as soon as it writes to the dead server's pipes.
// Provisioner processes terraform started (local-exec) are not reached.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// start starts cmd, and returns what waits for it in place of cmd.Wait.
// With noNewPrivs cmd can never gain privileges: Linux's no_new_privs,
// which fork and exec keep, so that neither terraform nor any process it
// starts (providers, provisioners) gains anything from sudo or another
// setuid or file-capability program.
//
// The flag belongs to a thread and cannot be cleared, and a process
// forked from a thread has the thread's: so the command is started from
// a thread of its own, set for it, and the thread lives until the command
// has ended (procAttr's Pdeathsig is the death of the thread that started
// it, not of the process), then ends with its goroutine (locked to it and
// never unlocked, which makes the runtime end the thread, or, should it be
// the process's main thread, park it for good): no other goroutine ever
// runs with the flag.
func (j *jobExec) start(cmd *exec.Cmd) (wait func() error, err error) {
	return StartCommand(cmd, j.noNewPrivs)
}

// StartCommand is the runner's start for another executor (module test
// runs): cmd started, with noNewPrivs unable to gain privileges (start).
func StartCommand(cmd *exec.Cmd, noNewPrivs bool) (wait func() error, err error) {
	if !noNewPrivs {
		return cmd.Wait, cmd.Start()
	}
	started, ended := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			started <- fmt.Errorf("starting terraform without privileges to gain (no_new_privs): %w", err)
			return
		}
		err := cmd.Start()
		started <- err
		if err == nil {
			ended <- cmd.Wait()
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error { return <-ended }, nil
}
