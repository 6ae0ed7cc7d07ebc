package script

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// A supervisor stands between the worker and each script. The worker runs
// its own executable again with SuperviseArg first; that process starts
// the script and outlives it, so that:
//
//   - when the worker dies by any means (kill -9 included), the supervisor
//     sees the end of the life pipe, which only the worker held open, and
//     kills everything the script started at once;
//   - when the script exits, the supervisor kills whatever it left behind,
//     daemons that left its process group included, so that they cannot
//     hold the script's output open or run on after its message;
//   - a script that cannot be started at all is told apart from one that
//     ran and failed.
//
// On Linux the supervisor is a child subreaper: descendants orphaned by the
// script become its children rather than init's, so it can find and kill
// them even after setsid. A parent-death signal alone would reach the
// script but not its children, and a cgroup needs privileges and a
// delegated hierarchy that a worker rarely has. The worker is a child
// subreaper too (see PrepareWorker): should a script kill its supervisor,
// what it started becomes the worker's, which kills it.
//
// The supervisor's arguments are SuperviseArg, the user to run the script
// as (see User.arg; "-" for the supervisor's own), then the script's argv.
const SuperviseArg = "__leasehold_supervise"

// The supervisor's own exit statuses; how the script ended goes through
// the report pipe.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// Descriptors the supervisor inherits beyond the standard three.
const (
	// lifeFD is the read end of a pipe that the worker holds open while
	// the script may run. Its end (the worker died, or wants the script
	// gone now) kills the script and its descendants.
	lifeFD = 3
	// reportFD is the write end of a pipe on which the supervisor reports
	// how the script ended: "status N" with its wait status, or
	// "start: ERROR" when it could not be started.
	reportFD = 4
)

// Supervise runs argv as the script and returns the supervisor's exit
// status. The standard streams are passed on to the script.
func Supervise(args []string) int {
	_ = noDump()
	syscall.CloseOnExec(lifeFD)
	syscall.CloseOnExec(reportFD)
	life := os.NewFile(lifeFD, "life")
	report := os.NewFile(reportFD, "report")
	var cred *syscall.Credential
	var err error
	if len(args) > 0 {
		cred, err = parseCredential(args[0])
	}
	if life == nil || report == nil || len(args) < 2 || err != nil {
		fmt.Fprintln(os.Stderr, "leasehold: the supervisor is started by leasehold work only")
		return exitUsage
	}
	argv := args[1:]
	_ = becomeSubreaper()
	// The worker asks the script to stop with SIGTERM to the supervisor,
	// which passes it on. Signals are caught, never ignored: caught ones
	// return to their defaults in the script, ignored ones would stay
	// ignored there.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = scriptAttr(cred)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(report, "start: %s", oneLine(err))
		return exitFailure
	}
	// The script has the standard streams now; the supervisor must not
	// keep them open past the script's descendants.
	for _, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		_ = f.Close()
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lost := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, life)
		close(lost)
	}()
	for {
		select {
		case <-terms:
			_ = syscall.Kill(-pid, syscall.SIGTERM)
		case <-lost:
			killDescendants(pid)
			return exitFailure
		case err := <-exited:
			killDescendants(pid)
			ws, ok := waitStatus(cmd.ProcessState, err)
			if !ok {
				fmt.Fprintf(report, "start: wait: %s", oneLine(err))
				return exitFailure
			}
			fmt.Fprintf(report, "status %d", uint32(ws))
			return exitOK
		}
	}
}

func waitStatus(ps *os.ProcessState, err error) (syscall.WaitStatus, bool) {
	if ps == nil {
		return 0, false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ws, ok
}

// killDescendants kills the script's process group, then every child of
// this process until it has none: descendants orphaned by the deaths before
// become its children in turn, so having no child means that nothing the
// script started is left.
func killDescendants(script int) {
	_ = syscall.Kill(-script, syscall.SIGKILL)
	killAdopted(children, killReap)
}

// killAdopted kills and reaps, with killReap, the children that orphans
// lists, and lists again until it lists none: the processes a dead
// supervisor's script left behind, which a child subreaper adopts. Each
// death hands that process's own children to this one before its wait
// returns, so the loop ends with the whole tree gone. It returns how many
// it killed.
func killAdopted(orphans func() []int, killReap func(pid int)) int {
	killed := 0
	// A bound keeps a fork bomb from holding the worker forever.
	for range 10000 {
		pids := orphans()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			killReap(pid)
			killed++
		}
	}
	return killed
}

// scriptEnded is how a supervised script ended, as its supervisor reported.
type scriptEnded struct {
	status syscall.WaitStatus
	// startErr is set when the script could not be started.
	startErr string
}

// parseReport reads the supervisor's report; ok is false when there is
// none, because the supervisor itself failed.
func parseReport(s string) (scriptEnded, bool) {
	if rest, ok := strings.CutPrefix(s, "start: "); ok {
		return scriptEnded{startErr: rest}, true
	}
	if rest, ok := strings.CutPrefix(s, "status "); ok {
		n, err := strconv.ParseUint(rest, 10, 32)
		if err == nil {
			return scriptEnded{status: syscall.WaitStatus(n)}, true
		}
	}
	return scriptEnded{}, false
}

// String describes how a script that ran ended, in os/exec's words.
func (e scriptEnded) String() string {
	switch ws := e.status; {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	default:
		return fmt.Sprintf("wait status %#x", uint32(ws))
	}
}
