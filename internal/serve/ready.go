package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// readyFor is how long a readiness check's answer is given again: a
// load balancer, or a stranger, asking many times a second costs the
// database one committed write a second.
const readyFor = time.Second

// readiness shares the database's write check among the callers of
// /readyz: one check runs at a time, and its answer holds for readyFor.
type readiness struct {
	mu      sync.Mutex
	at      time.Duration
	err     error
	checked bool
	running chan struct{} // closed when the running check ends; nil when none runs
}

// ready is the readiness check: the server is not stopping and its
// database commits a write within readyTimeout. A database that answers
// but refuses writes (read-only, a full disk, a standby) fails every send
// and delete, so it is not ready.
func (s *Server) ready(ctx context.Context) error {
	select {
	case <-s.stopping:
		return errors.New("the server is stopping")
	default:
	}
	r := &s.readiness
	r.mu.Lock()
	if r.checked && s.cfg.Clock.Monotonic()-r.at < readyFor {
		err := r.err
		r.mu.Unlock()
		return err
	}
	running := r.running
	if running == nil {
		running = make(chan struct{})
		r.running = running
		// The check is the server's, not the caller's: a caller that
		// goes away does not end it for the others.
		go s.checkWrite(context.WithoutCancel(ctx), running)
	}
	r.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// checkWrite runs one write check and records its answer for ready.
func (s *Server) checkWrite(ctx context.Context, done chan struct{}) {
	ctx, cancel := clock.WithTimeout(ctx, s.cfg.Clock, readyTimeout)
	defer cancel()
	err := s.cfg.Store.CheckWrite(ctx)
	if err != nil {
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			err = fmt.Errorf("the database did not commit a write within %s", readyTimeout)
		} else {
			err = fmt.Errorf("the database does not take writes: %w", err)
		}
	}
	r := &s.readiness
	r.mu.Lock()
	r.err, r.at, r.checked, r.running = err, s.cfg.Clock.Monotonic(), true, nil
	r.mu.Unlock()
	close(done)
}
