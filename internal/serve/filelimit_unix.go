//go:build unix

package serve

import "syscall"

// raiseFileLimit raises the soft limit of open files to the hard limit
// and returns it; 0 when it cannot be read.
func raiseFileLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0
		}
	}
	return int(min(l.Cur, 1<<30))
}
