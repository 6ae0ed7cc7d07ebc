//go:build !linux

package script

import (
	"os"
	"syscall"
)

// Without a child subreaper the supervisor can reach only the script's
// process group: descendants that left it are not killed.

var selfExe, _ = os.Executable()

func becomeSubreaper() {}

func scriptAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func children() []int { return nil }
