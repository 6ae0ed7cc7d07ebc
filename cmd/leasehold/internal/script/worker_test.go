package script

import (
	"slices"
	"sync"
	"testing"
)

// procs is a process table for the supervisors' bookkeeping: this
// process's children, and the pids killed and reaped.
type procs struct {
	mu       sync.Mutex
	children []int
	killed   []int
	// hold, when set, is called before a kill, which waits for it.
	hold func(pid int)
}

func (p *procs) list() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.children)
}

func (p *procs) killReap(pid int) {
	p.mu.Lock()
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		hold(pid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = append(p.killed, pid)
	p.children = slices.DeleteFunc(p.children, func(c int) bool { return c == pid })
}

func (p *procs) set(children ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.children = children
}

func (p *procs) takeKilled() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.killed
	p.killed = nil
	return k
}

func forked(pid int) func() (int, error) { return func() (int, error) { return pid, nil } }

// A supervisor whose pid is reused by a new one before its end is
// recorded forgets only itself: the new one is never taken for an orphan,
// when the old one died without reporting nor when a later one does.
func TestSupervisorPidReused(t *testing.T) {
	p := &procs{}
	s := newSupervisorSet(p.list, p.killReap)
	a, _ := s.add(forked(100))
	// a is waited for, and its pid goes to b before a's end is recorded.
	b, _ := s.add(forked(100))
	p.set(100, 200) // b, and an orphan a's script left
	if n := s.ended(a, true); n != 1 || !slices.Equal(p.takeKilled(), []int{200}) {
		t.Fatalf("a's end killed %d, want the orphan 200 alone", n)
	}
	c, _ := s.add(forked(300))
	p.set(100) // c was waited for, b runs
	if n := s.ended(c, true); n != 0 {
		t.Fatalf("c's end killed %v, want none: 100 is b", p.takeKilled())
	}
	if n := s.ended(b, false); n != 0 {
		t.Fatalf("b's end killed %v", p.takeKilled())
	}
	if len(s.live) != 0 || len(s.claimed) != 0 {
		t.Fatalf("left %d live and %d claimed", len(s.live), len(s.claimed))
	}
}

// An orphan that does not die at once holds neither a supervisor's start
// nor another end, and no other end kills or waits for it again.
func TestOrphanReapedOutsideTheLock(t *testing.T) {
	p := &procs{}
	s := newSupervisorSet(p.list, p.killReap)
	a, _ := s.add(forked(100))
	b, _ := s.add(forked(101))
	p.set(200)
	reaping, release := make(chan struct{}), make(chan struct{})
	p.hold = func(pid int) {
		close(reaping)
		<-release
	}
	done := make(chan int)
	go func() { done <- s.ended(a, true) }()
	<-reaping
	p.mu.Lock()
	p.hold = nil
	p.mu.Unlock()
	if !s.mu.TryLock() {
		t.Fatal("the set is locked while an orphan is reaped")
	}
	s.mu.Unlock()
	c, err := s.add(forked(102))
	if err != nil {
		t.Fatal(err)
	}
	p.set(200, 102)
	if n := s.ended(b, true); n != 0 {
		t.Fatalf("b's end killed %v, which a's end is reaping or a live supervisor", p.takeKilled())
	}
	close(release)
	if n := <-done; n != 1 || !slices.Equal(p.takeKilled(), []int{200}) {
		t.Fatalf("a's end killed %d", n)
	}
	s.ended(c, false)
}
