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

// socketReset reports whether socket fd was reset by its peer: an RST
// moves a TCP socket to CLOSE, where a FIN leaves it in CLOSE_WAIT.
func socketReset(fd uintptr) bool {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	return err == nil && info.State == tcpClose
}

// tcpClose is TCP_CLOSE of the kernel's TCP states (include/net/tcp_states.h).
const tcpClose = 7
