//go:build !linux

package runner

import "syscall"

// procAttr puts terraform in its own process group (see proc_linux.go).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
