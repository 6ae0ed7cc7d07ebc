package script

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
)

// PrepareWorker readies the calling process to run scripts: it becomes a
// child subreaper, so that what a script leaves when its supervisor is
// killed comes to it rather than to init, and non-dumpable, so that
// scripts of the same user cannot read its environment or memory
// through /proc. It also leaves the cores to the scripts (see
// workerProcs).
func PrepareWorker() error {
	if err := Protect(); err != nil {
		return err
	}
	if err := becomeSubreaper(); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(workerProcs(runtime.GOMAXPROCS(0)))
	}
	return nil
}

// workerProcs is how many threads run the worker's Go code at once when
// the process may use cpus cores, unless GOMAXPROCS says: a quarter of
// them, one at least. The scripts are the work and need the cores; the
// worker only claims, forks through its supervisor and completes, and a Go
// runtime spread over every core spends more waking idle threads at each
// handoff between its goroutines than on that (on 2 cores, with a shell
// script per message, about a sixth of the worker's CPU time).
func workerProcs(cpus int) int { return max(1, cpus/4) }

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
