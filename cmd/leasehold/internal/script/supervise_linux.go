package script

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// selfExe runs this very executable, even after a deploy replaced or
// removed its file.
const selfExe = "/proc/self/exe"

// becomeSubreaper makes orphaned descendants this process's children.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// noDump makes this process non-dumpable: its /proc/PID files that need a
// tracer's rights (environ, mem, fd, maps...) belong to root from then on,
// so that another process of the same user, a script included, cannot
// read them, and it leaves no core file. The flag is reset by execve, so
// every process of leasehold's sets it again.
func noDump() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// scriptAttr puts the script in a process group of its own, and kills it
// should the supervisor die before it. cred, when set, is the user the
// script runs as; the parent-death signal is set after the change of user,
// which would clear it.
func scriptAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// children lists this process's children, from /proc.
func children() []int {
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it ended meanwhile
		}
		// The parent's pid is the second field after the parenthesised
		// command name, which may itself hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// killReap kills a child of this process and waits for it.
func killReap(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
