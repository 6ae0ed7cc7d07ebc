package script

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/leasehold/leasehold/clock"
)

// errSupervisorGone is a run's start on a supervisor that has ended.
var errSupervisorGone = errors.New("the supervising process has ended")

// errVarsTooLong is a message whose variables (its key, mostly) do not fit
// in a start request.
var errVarsTooLong = errors.New("the message's variables are too long for the script's environment")

// supervisorConn is the worker's side of one supervisor: the process, the
// socket to it, and the runs waiting for its report.
type supervisorConn struct {
	cmd  *exec.Cmd
	sv   *supervisor
	conn *net.UnixConn
	// done is closed once the supervisor has been waited for, and what
	// its scripts left killed.
	done    chan struct{}
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan runEnd
	gone    bool // no run can start any more
	closing bool // the worker closed the socket
	killed  bool // the worker killed the supervisor (kill)
}

// runEnd is how a run ended: the supervisor's report, or none (ok false)
// when the supervisor ended first; then waitErr is how it ended, orphans
// how many processes its scripts left that this process killed, and
// killed whether this process killed the supervisor itself.
type runEnd struct {
	ended   scriptEnded
	ok      bool
	waitErr error
	orphans int
	killed  bool
}

// startSupervisor starts a supervisor that runs argv as user, with env as
// the environment of every script but for the message's variables.
func startSupervisor(argv []string, user *User, env []string) (*supervisorConn, error) {
	fds, err := socketpair()
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	own, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "worker")
	defer theirs.Close()
	c, err := net.FileConn(own)
	_ = own.Close()
	if err != nil {
		_ = theirs.Close()
		return nil, err
	}
	// The supervisor runs in a process group of its own: a terminal's
	// Ctrl-C reaches only leasehold, which decides.
	cmd := exec.Command(selfExe, append([]string{SuperviseArg, user.arg()}, argv...)...)
	cmd.Args[0] = "leasehold"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = env
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	sv, err := supervisors.start(cmd)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	s := &supervisorConn{cmd: cmd, sv: sv, conn: c.(*net.UnixConn), done: make(chan struct{}), waiting: map[uint64]chan runEnd{}}
	go s.readReports()
	return s, nil
}

// readReports hands each report to its run until the supervisor ends, then
// waits for it, kills what its scripts left unless it ended because the
// worker closed it, and tells the runs still waiting that no report comes.
func (s *supervisorConn) readReports() {
	defer close(s.done)
	buf := make([]byte, 4096)
	for {
		n, err := s.conn.Read(buf)
		if err != nil || n == 0 {
			break
		}
		f := strings.SplitN(string(buf[:n]), "\x00", 3)
		if len(f) != 3 || f[0] != "ended" {
			continue
		}
		id, err := strconv.ParseUint(f[1], 10, 64)
		ended, ok := parseReport(f[2])
		if err != nil || !ok {
			continue
		}
		s.mu.Lock()
		ch := s.waiting[id]
		delete(s.waiting, id)
		s.mu.Unlock()
		if ch != nil {
			ch <- runEnd{ended: ended, ok: true}
		}
	}
	s.mu.Lock()
	s.gone = true
	closing := s.closing
	s.mu.Unlock()
	_ = s.conn.Close()
	waitErr := s.cmd.Wait()
	orphans := supervisors.ended(s.sv, !closing || waitErr != nil)
	s.mu.Lock()
	waiting, killed := s.waiting, s.killed
	s.waiting = nil
	s.mu.Unlock()
	for _, ch := range waiting {
		ch <- runEnd{waitErr: waitErr, orphans: orphans, killed: killed}
	}
}

// alive reports whether runs may still start.
func (s *supervisorConn) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.gone
}

// start asks for a run with vars added to the environment and streams as
// its standard input, output and error, and returns its id and where its
// end comes.
func (s *supervisorConn) start(vars []string, streams [3]*os.File) (uint64, <-chan runEnd, error) {
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return 0, nil, errSupervisorGone
	}
	s.next++
	id := s.next
	ch := make(chan runEnd, 1)
	s.waiting[id] = ch
	s.mu.Unlock()
	p := packet(append([]string{"start", strconv.FormatUint(id, 10)}, vars...)...)
	err := fmt.Errorf("%w: %d bytes, over the limit of %d", errVarsTooLong, len(p), maxPacket)
	if len(p) <= maxPacket {
		_, _, err = s.conn.WriteMsgUnix(p, syscall.UnixRights(int(streams[0].Fd()), int(streams[1].Fd()), int(streams[2].Fd())), nil)
	}
	if err != nil {
		// Nothing started: the supervisor has ended, or the request could
		// not be made.
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
		return 0, nil, err
	}
	return id, ch, nil
}

// signal sends op ("term" or "kill") for run id; a supervisor that has
// ended has nothing to do.
func (s *supervisorConn) signal(op string, id uint64) {
	_, _ = s.conn.Write(packet(op, strconv.FormatUint(id, 10)))
}

// kill kills the supervisor itself: its scripts die with it, and what they
// left comes to this process, which kills it.
func (s *supervisorConn) kill() {
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
	_ = s.cmd.Process.Kill()
}

// close ends the supervisor, which kills what is left of its scripts, and
// waits for it; one that has not ended supervisorGrace later (a script
// stopped it, say) is killed.
func (s *supervisorConn) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	_ = s.conn.CloseWrite()
	t := clock.System().NewTimer(supervisorGrace)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C():
		s.kill()
		<-s.done
	}
}
