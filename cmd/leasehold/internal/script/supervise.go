package script

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// A supervisor stands between the worker and its scripts: one process per
// worker, started from the worker's own executable with SuperviseArg
// first, that forks every script and outlives each, so that:
//
//   - when the worker dies by any means (kill -9 included), the supervisor
//     sees the end of its socket, which only the worker held open, and
//     kills every script and everything they started at once;
//   - when a script exits, the supervisor kills whatever it left behind,
//     daemons that left its session included, so that they cannot hold
//     the script's output open or run on after its message;
//   - a script that cannot be started at all is told apart from one that
//     ran and failed.
//
// On Linux the supervisor is a child subreaper: descendants orphaned by a
// script become its children rather than init's, so it can find and kill
// them even after setsid. A parent-death signal alone would reach the
// scripts but not their children, and a cgroup needs privileges and a
// delegated hierarchy that a worker rarely has. The worker is a child
// subreaper too (see PrepareWorker): should a script kill the supervisor,
// what every script started becomes the worker's, which kills it.
//
// Since one supervisor adopts the orphans of every script, it ties each
// orphan to its script's run: by its session, which every script starts
// (setsid) and every descendant keeps unless it calls setsid itself; else
// by the run's marker, the variable LEASEHOLD_RUN that the supervisor puts
// in each script's environment, which descendants inherit and the
// supervisor reads from /proc/PID/environ. An orphan of a run still going
// is left alone; one of a run that has ended is killed. An orphan tied to
// no run (it left the session and dropped or lost the marker, or cannot be
// read) is killed once every run that was going when it was found has
// ended, its own among them.
//
// The worker and the supervisor speak over a socket, in packets of fields
// separated by NUL bytes:
//
//	start ID VAR=VALUE...   fork a script with these variables added; its
//	                        standard streams ride along as three descriptors
//	term ID                 SIGTERM to the script's process group
//	kill ID                 kill the run's script and everything it started
//	ended ID REPORT         (from the supervisor) the run is over, leftovers
//	                        gone: "status N" with the script's wait status,
//	                        or "start: ERROR" when it could not start
//
// The supervisor's arguments are SuperviseArg, the user to run scripts as
// (see User.arg; "-" for the supervisor's own), then the script's argv.
const SuperviseArg = "__leasehold_supervise"

// runMarker names the variable that ties a script's descendants to its run.
const runMarker = "LEASEHOLD_RUN"

// The supervisor's own exit statuses; how each script ended goes through
// the socket.
const (
	exitOK    = 0
	exitUsage = 2
)

// connFD is the supervisor's end of the socket, the first descriptor it
// inherits beyond the standard three.
const connFD = 3

// maxPacket bounds a packet between the worker and the supervisor: a start
// carries the message's variables, its key among them.
const maxPacket = 64 << 10

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func packet(fields ...string) []byte { return []byte(strings.Join(fields, "\x00")) }

// Supervise runs the supervisor until the worker goes, and returns its
// exit status.
func Supervise(args []string) int {
	_ = noDump()
	// Its loop is serial: one thread for its Go code spares it the
	// wakeups of idle threads at each handoff between goroutines.
	runtime.GOMAXPROCS(1)
	syscall.CloseOnExec(connFD)
	var cred *syscall.Credential
	var err error
	if len(args) > 0 {
		cred, err = parseCredential(args[0])
	}
	var conn *net.UnixConn
	if f := os.NewFile(connFD, "worker"); f != nil && err == nil && len(args) >= 2 {
		c, cerr := net.FileConn(f)
		_ = f.Close()
		conn, _ = c.(*net.UnixConn)
		if cerr != nil {
			conn = nil
		}
	}
	if conn == nil {
		fmt.Fprintln(os.Stderr, "leasehold: the supervisor is started by leasehold work only")
		return exitUsage
	}
	_ = becomeSubreaper()
	// SIGCHLD is caught, never ignored: caught signals return to their
	// defaults in the scripts, ignored ones would stay ignored there.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	s := newSupervisorProc(conn, args[1:], cred)
	reqs := make(chan request)
	go s.readRequests(reqs)
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				s.killAll()
				return exitOK
			}
			s.handle(r)
		case <-chld:
			// Signals of children that end meanwhile may merge into this
			// one: reap waits for every child that has ended.
			s.reap()
		}
	}
}

// request is one packet from the worker.
type request struct {
	op, id string
	vars   []string
	files  []*os.File
}

// readRequests passes the worker's packets on until the socket ends,
// when it closes out.
func (s *supervisorProc) readRequests(out chan<- request) {
	defer close(out)
	buf := make([]byte, maxPacket)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		var files []*os.File
		if cmsgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range cmsgs {
				fds, _ := syscall.ParseUnixRights(&m)
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "stream"))
				}
			}
		}
		f := strings.Split(string(buf[:n]), "\x00")
		r := request{op: f[0], files: files}
		if len(f) > 1 {
			r.id, r.vars = f[1], f[2:]
		}
		out <- r
	}
}

// supervisorProc is the supervisor's state; its main loop alone touches it.
type supervisorProc struct {
	conn   *net.UnixConn
	argv   []string
	cred   *syscall.Credential
	env    []string // the scripts' environment but for their runs' variables
	marker string   // "LEASEHOLD_RUN=PID.", the run's id follows
	// runs are the runs not yet reported, by id; sessions the same by
	// their script's pid, which is their session's id.
	runs     map[string]*scriptRun
	sessions map[int]*scriptRun
	scripts  map[int]*scriptRun // scripts not yet reaped, by pid
	// killing are the leftovers killed and not yet reaped, with their run
	// (nil for strays and leftovers of reported runs).
	killing map[int]*scriptRun
	// strays are orphans tied to no run, each with the runs it waits for.
	strays map[int]map[*scriptRun]bool
}

// scriptRun is one run of the script.
type scriptRun struct {
	id     string
	pid    int
	reaped bool // the script has ended
	killed bool // the worker wants everything of the run gone
	status syscall.WaitStatus
	// leftovers counts the run's orphans killed and not yet reaped.
	leftovers int
}

func (r *scriptRun) over() bool { return r.reaped || r.killed }

func newSupervisorProc(conn *net.UnixConn, argv []string, cred *syscall.Credential) *supervisorProc {
	return &supervisorProc{conn: conn, argv: argv, cred: cred, env: os.Environ(),
		marker:   runMarker + "=" + strconv.Itoa(os.Getpid()) + ".",
		runs:     map[string]*scriptRun{},
		sessions: map[int]*scriptRun{},
		scripts:  map[int]*scriptRun{},
		killing:  map[int]*scriptRun{},
		strays:   map[int]map[*scriptRun]bool{},
	}
}

func (s *supervisorProc) send(fields ...string) { _, _ = s.conn.Write(packet(fields...)) }

func (s *supervisorProc) handle(r request) {
	defer func() {
		for _, f := range r.files {
			_ = f.Close()
		}
	}()
	run := s.runs[r.id]
	switch r.op {
	case "start":
		if run != nil || len(r.files) != 3 {
			s.send("ended", r.id, "start: the worker's request was malformed")
			return
		}
		s.start(r)
	case "term":
		if run != nil && !run.reaped {
			_ = syscall.Kill(-run.pid, syscall.SIGTERM)
		}
	case "kill":
		if run != nil {
			run.killed = true
			if !run.reaped {
				_ = syscall.Kill(run.pid, syscall.SIGKILL)
			}
			_ = syscall.Kill(-run.pid, syscall.SIGKILL)
			s.sweep()
		}
	}
}

// start forks the script in a session of its own, with the run's marker.
func (s *supervisorProc) start(r request) {
	env := make([]string, 0, len(s.env)+len(r.vars)+1)
	env = append(append(append(env, s.env...), r.vars...), s.marker+r.id)
	pid, err := syscall.ForkExec(s.argv[0], s.argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{r.files[0].Fd(), r.files[1].Fd(), r.files[2].Fd()},
		Sys:   scriptAttr(s.cred),
	})
	if err != nil {
		s.send("ended", r.id, "start: "+oneLine(&os.PathError{Op: "fork/exec", Path: s.argv[0], Err: err}))
		return
	}
	run := &scriptRun{id: r.id, pid: pid}
	s.runs[r.id], s.sessions[pid], s.scripts[pid] = run, run, run
}

// reap waits for every child that has ended, then kills the leftovers of
// runs that are over and reports the runs with nothing left.
func (s *supervisorProc) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			break
		}
		if run := s.scripts[pid]; run != nil {
			delete(s.scripts, pid)
			run.reaped, run.status = true, ws
			// What is left of its process group goes at once; the rest,
			// orphans now, in the sweep.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			continue
		}
		if run, ok := s.killing[pid]; ok {
			delete(s.killing, pid)
			if run != nil {
				run.leftovers--
			}
		}
		delete(s.strays, pid)
	}
	s.sweep()
	s.finish()
}

// sweep looks at every child that is not a script: an orphan of a run that
// is over is killed, one tied to no run becomes a stray. Killed ones come
// back through reap, and their children, orphans in turn, through the next
// sweep.
func (s *supervisorProc) sweep() {
	for _, pid := range adopted() {
		if s.scripts[pid] != nil {
			continue
		}
		if _, ok := s.killing[pid]; ok {
			continue
		}
		if _, ok := s.strays[pid]; ok {
			continue
		}
		run, tied := s.tie(pid)
		switch {
		case tied && run == nil: // of a run already reported
			s.kill(pid, nil)
		case tied && run.over():
			s.kill(pid, run)
		case tied: // of a run still going: its business
		default:
			waits := map[*scriptRun]bool{}
			for _, r := range s.runs {
				waits[r] = true
			}
			if len(waits) == 0 {
				s.kill(pid, nil)
			} else {
				s.strays[pid] = waits
			}
		}
	}
}

func (s *supervisorProc) kill(pid int, run *scriptRun) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	s.killing[pid] = run
	if run != nil {
		run.leftovers++
	}
}

// tie finds the run an orphan belongs to: tied and a nil run when it
// belongs to one already reported, not tied when nothing says.
func (s *supervisorProc) tie(pid int) (run *scriptRun, tied bool) {
	if sid, ok := sessionOf(pid); ok {
		if run := s.sessions[sid]; run != nil {
			return run, true
		}
	}
	env, ok := environOf(pid)
	if !ok {
		return nil, false
	}
	for v := range bytes.SplitSeq(env, []byte{0}) {
		if id, ok := bytes.CutPrefix(v, []byte(s.marker)); ok {
			run := s.runs[string(id)]
			return run, true
		}
	}
	return nil, false
}

// finish reports the runs that are over with no leftover unreaped, and
// kills the strays that no longer wait for any run.
func (s *supervisorProc) finish() {
	for id, run := range s.runs {
		if !run.reaped || run.leftovers > 0 {
			continue
		}
		delete(s.runs, id)
		delete(s.sessions, run.pid)
		s.send("ended", id, "status "+strconv.FormatUint(uint64(uint32(run.status)), 10))
		for pid, waits := range s.strays {
			delete(waits, run)
			if len(waits) == 0 {
				delete(s.strays, pid)
				s.kill(pid, nil)
			}
		}
	}
}

// killAll kills every script and everything they started, once the worker
// is gone.
func (s *supervisorProc) killAll() {
	for pid := range s.sessions {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	killAdopted(children, killReap)
}

// killAdopted kills and reaps, with killReap, the children that orphans
// lists, and lists again until it lists none. Each death hands that
// process's own children to this one (a child subreaper) before its wait
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
