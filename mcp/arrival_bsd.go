//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package mcp

import "golang.org/x/sys/unix"

// fionread is FIONREAD on the BSDs and macOS (_IOR('f', 127, int)).
const fionread = 0x4004667f

// pendingBytes is how many received bytes the kernel holds for socket fd
// (-1: unknown).
func pendingBytes(fd uintptr) int {
	n, err := unix.IoctlGetInt(int(fd), fionread)
	if err != nil {
		return -1
	}
	return n
}

// socketReset is not asked of the kernel here: only a read that failed
// with ECONNRESET shows a reset.
func socketReset(uintptr) bool { return false }
