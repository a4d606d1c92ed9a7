package mcp

import "golang.org/x/sys/unix"

// pendingBytes is how many received bytes the kernel holds for socket fd
// (-1: unknown).
func pendingBytes(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	if err != nil {
		return -1
	}
	return n
}
