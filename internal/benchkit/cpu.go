package benchkit

import (
	"syscall"
	"time"
)

// CPUTime is this process's CPU time so far, user and system (a sync's
// journal commit is the kernel's work, counted here).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
