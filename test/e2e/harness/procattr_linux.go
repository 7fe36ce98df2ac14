package harness

import "syscall"

// sysProcAttr makes the kernel kill a child when the test process dies, so an interrupted test
// run leaves no etcd or kube-apiserver behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
