package harness

import "syscall"

// sysProcAttr makes the kernel kill a child when the test process dies, so an interrupted test
// run leaves no etcd or kube-apiserver behind, and puts the child in a process group of its own,
// so that a Ctrl-C in the terminal reaches only the test (or demo) process, which then stops its
// children in order (the CCM before kube-apiserver before etcd) instead of all at once.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
