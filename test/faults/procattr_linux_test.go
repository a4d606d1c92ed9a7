package faults

import "syscall"

// childAttr makes a child die with the test process (a test killed by
// -timeout or a signal leaves no cluster behind).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
