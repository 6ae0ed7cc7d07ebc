package script

import (
	"fmt"
	"os/exec"
	"sync"
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
// waited for: its only children but for what dead supervisors' scripts
// left, which it adopts as a child subreaper.
var supervisors = supervisorSet{pids: map[int]bool{}}

type supervisorSet struct {
	// mu is held while a supervisor starts, so that a new one is never
	// taken for an orphan between its fork and its entry in pids.
	mu   sync.Mutex
	pids map[int]bool
}

func (s *supervisorSet) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.pids[cmd.Process.Pid] = true
	return nil
}

// ended forgets the supervisor pid, which has been waited for. When it
// died without reporting, every other child of this process is an orphan
// that a dead supervisor's script left: they are killed and reaped, and
// their number returned. Supervisors' own children are os/exec's to wait
// for, and are kept.
func (s *supervisorSet) ended(pid int, died bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pids, pid)
	if !died {
		return 0
	}
	return killAdopted(func(p int) bool { return s.pids[p] })
}
