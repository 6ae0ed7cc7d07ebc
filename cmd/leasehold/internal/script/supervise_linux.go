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

// scriptAttr puts the script in a session of its own, which ties its
// descendants to it, and kills it should the supervisor die before it.
// cred, when set, is the user the script runs as; the parent-death signal
// is set after the change of user, which would clear it.
func scriptAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// socketpair returns a connected pair of sockets that keep the bounds of
// what is written, closed on exec.
func socketpair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
}

// children lists this process's children: from each thread's children
// file, or from every process's stat where the kernel has no such file.
// Children leave those lists only when this process reaps them.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return childrenByStat()
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) && t.Name() == strconv.Itoa(os.Getpid()) {
			return childrenByStat()
		}
		out = append(out, pids(string(b))...)
	}
	return out
}

// adopted lists the children of this process's main thread: the orphans
// it adopted as a child subreaper land there, with the children that
// thread forked.
func adopted() []int {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
	if err != nil {
		return childrenByStat()
	}
	return pids(string(b))
}

func pids(list string) []int {
	var out []int
	for _, f := range strings.Fields(list) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// childrenByStat lists this process's children from every process's stat.
func childrenByStat() []int {
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := statFields(pid); ok && len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
				out = append(out, pid)
			}
		}
	}
	return out
}

// statFields are the fields of /proc/PID/stat after the parenthesised
// command name, which may itself hold spaces and parentheses: state,
// parent, process group, session...
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false // it ended meanwhile
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

// sessionOf is pid's session id.
func sessionOf(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 4 {
		return 0, false
	}
	sid, err := strconv.Atoi(f[3])
	return sid, err == nil
}

// environOf is the environment pid was started with, NUL-separated; not
// readable when pid is non-dumpable or of a user this process may not
// trace.
func environOf(pid int) ([]byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return b, err == nil
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
