package runner

import "syscall"

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
