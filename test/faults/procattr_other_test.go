//go:build !linux

package faults

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
