//go:build !linux

package script

import (
	"os"
	"syscall"
)

// Without a child subreaper the supervisor can reach only each script's
// process group: descendants that left it are not killed, and neither are
// those of a supervisor that was killed. Nor can a process make itself
// non-dumpable: a script of the same user may read the worker's
// environment where the system lets it.

var selfExe, _ = os.Executable()

func becomeSubreaper() error { return nil }

func noDump() error { return nil }

func scriptAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Credential: cred}
}

// socketpair returns a connected pair of datagram sockets, closed on exec.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	return fds, err
}

func children() []int { return nil }

func adopted() []int { return nil }

func sessionOf(int) (int, bool) { return 0, false }

func environOf(int) ([]byte, bool) { return nil, false }

func killReap(int) {}
