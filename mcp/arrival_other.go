//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package mcp

// pendingBytes cannot ask the kernel here, so no read counts as having
// waited for its bytes: every request's arrival is its connection's
// accept time. A new connection's first request can still be evidence
// for its session; a later request on the same connection never is.
func pendingBytes(uintptr) int { return -1 }

// socketReset cannot ask the kernel here: only a read that failed with
// ECONNRESET shows a reset.
func socketReset(uintptr) bool { return false }
