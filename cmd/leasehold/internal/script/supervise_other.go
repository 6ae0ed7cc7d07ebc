//go:build !linux

package script

import (
	"os"
	"syscall"
)

// Without a child subreaper the supervisor can reach only the script's
// process group: descendants that left it are not killed, and neither are
// those of a supervisor that was killed. Nor can a process make itself
// non-dumpable: a script of the same user may read the worker's
// environment where the system lets it.

var selfExe, _ = os.Executable()

func becomeSubreaper() error { return nil }

func noDump() error { return nil }

func scriptAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

func children() []int { return nil }

func killReap(int) {}
