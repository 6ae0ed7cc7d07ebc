// Package runstate holds the start and stop bookkeeping that every leasehold
// loop shares: Run once, Shutdown any number of times from any goroutine,
// before Run too, and Running in between.
//
// It is not part of lifecycle: the worker, the server, the dashboard and
// the client keep their loops' state with it, so lifecycle would have to
// export Begin and End, whose End must follow a successful Begin exactly
// once. A user's loop gets the same bookkeeping from lifecycle.Func.
package runstate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrAlreadyRun reports a second call of Run on the same loop.
var ErrAlreadyRun = errors.New("loop already run")

// State tracks one loop. The zero value is ready to use.
type State struct {
	mu      sync.Mutex
	claimed bool // Run began, or Shutdown came first and nothing will run
	began   bool // Run began
	stop    chan struct{}
	done    chan struct{}
	stopped bool
	running atomic.Bool
}

func (s *State) init() {
	if s.stop == nil {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
	}
}

// Begin starts a run. It returns (true, nil) when the caller should run the
// loop and must call End when it stops; (false, nil) when Shutdown came
// first, so there is nothing to run; and (false, ErrAlreadyRun) on a second
// Run.
func (s *State) Begin() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.began {
		return false, ErrAlreadyRun
	}
	if s.claimed {
		return false, nil
	}
	s.claimed, s.began = true, true
	s.running.Store(true)
	return true, nil
}

// End marks the run over.
func (s *State) End() {
	s.running.Store(false)
	close(s.done)
}

// Stopping returns a channel that is closed once Shutdown is called.
func (s *State) Stopping() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.stop
}

// Done returns a channel that is closed when the loop has stopped, or at
// Shutdown when it never ran.
func (s *State) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.done
}

// RequestStop asks the loop to stop. Before Run, it settles that the loop
// will not run at all.
func (s *State) RequestStop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	if !s.claimed {
		s.claimed = true
		close(s.done)
	}
}

// Running reports whether Run is between Begin and End.
func (s *State) Running() bool { return s.running.Load() }

// Await waits until the loop has stopped or ctx ends, and returns nil or
// ctx's error.
func (s *State) Await(ctx context.Context) error {
	select {
	case <-s.Done():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Shutdown is RequestStop followed by Await: the whole Shutdown of a loop
// that needs nothing more.
func (s *State) Shutdown(ctx context.Context) error {
	s.RequestStop()
	return s.Await(ctx)
}
