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
)

// PrepareWorker readies the calling process to run scripts: it becomes a
// child subreaper, so that what a script leaves when its supervisor is
// killed comes to it rather than to init, and non-dumpable, so that
// scripts of the same user cannot read its environment or memory
// through /proc.
func PrepareWorker() error {
	if err := Protect(); err != nil {
		return err
	}
	if err := becomeSubreaper(); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	return nil
}

// Protect makes the calling process non-dumpable (see noDump). It is reset
// when the process executes another program.
func Protect() error {
	if err := noDump(); err != nil {
		return fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return nil
}

// supervisors are the supervisors this process started and has not yet
// waited for: its only children but for what the scripts of dead
// supervisors left, which it adopts as a child subreaper.
var supervisors = newSupervisorSet(children, killReap)

// supervisorSet keeps the supervisors by identity, not by pid: once one is
// waited for, its pid may go to a new supervisor before its end is
// recorded, and forgetting the pid would make the new one look like an
// orphan.
type supervisorSet struct {
	// mu is held while a supervisor starts, so that a new one is never
	// taken for an orphan between its fork and its entry in live, and
	// while the orphans are listed; never while a process is killed or
	// waited for.
	mu   sync.Mutex
	live map[*supervisor]struct{}
	// claimed are the orphans being killed and reaped. Until its wait
	// returns an orphan keeps its pid, since only this set reaps orphans,
	// so no one else may take it for a new orphan, kill it a second time
	// or wait for it.
	claimed map[int]bool
	// children lists this process's children and killReap kills and
	// reaps one: the system's, or a test's.
	children func() []int
	killReap func(pid int)
}

// supervisor is one start of a supervisor.
type supervisor struct{ pid int }

func newSupervisorSet(children func() []int, killReap func(pid int)) *supervisorSet {
	return &supervisorSet{live: map[*supervisor]struct{}{}, claimed: map[int]bool{}, children: children, killReap: killReap}
}

func (s *supervisorSet) start(cmd *exec.Cmd) (*supervisor, error) {
	return s.add(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
}

// add records the supervisor that fork starts, fork returning its pid.
func (s *supervisorSet) add(fork func() (int, error)) (*supervisor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return nil, err
	}
	sv := &supervisor{pid: pid}
	s.live[sv] = struct{}{}
	return sv, nil
}

// ended forgets sv, which has been waited for. When it died without
// reporting, every other child of this process is an orphan that a dead
// supervisor's script left: they are killed and reaped, and their number
// returned. Live supervisors are os/exec's to wait for, and are kept.
func (s *supervisorSet) ended(sv *supervisor, died bool) int {
	s.mu.Lock()
	delete(s.live, sv)
	s.mu.Unlock()
	if !died {
		return 0
	}
	return killAdopted(s.claimOrphans, func(pid int) {
		s.killReap(pid)
		s.mu.Lock()
		delete(s.claimed, pid)
		s.mu.Unlock()
	})
}

// claimOrphans returns the children that are neither a live supervisor
// nor claimed already, and claims them. A supervisor that was waited for
// but whose end is not recorded yet may share its pid with an orphan,
// which is then kept until that end is recorded.
func (s *supervisorSet) claimOrphans() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := make(map[int]bool, len(s.live))
	for sv := range s.live {
		kept[sv.pid] = true
	}
	var out []int
	for _, pid := range s.children() {
		if !kept[pid] && !s.claimed[pid] {
			s.claimed[pid] = true
			out = append(out, pid)
		}
	}
	return out
}

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
}

// runEnd is how a run ended: the supervisor's report, or none (ok false)
// when the supervisor ended first; then waitErr is how it ended, and
// orphans how many processes its scripts left that this process killed.
type runEnd struct {
	ended   scriptEnded
	ok      bool
	waitErr error
	orphans int
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
	waiting := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, ch := range waiting {
		ch <- runEnd{waitErr: waitErr, orphans: orphans}
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
func (s *supervisorConn) kill() { _ = s.cmd.Process.Kill() }

// close ends the supervisor, which kills what is left of its scripts, and
// waits for it.
func (s *supervisorConn) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	_ = s.conn.CloseWrite()
	<-s.done
}
