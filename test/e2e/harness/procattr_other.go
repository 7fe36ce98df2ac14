//go:build !linux

package harness

import "syscall"

// sysProcAttr has nothing to add outside Linux: children are stopped by t.Cleanup only.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
