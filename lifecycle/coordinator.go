package lifecycle

import (
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/clock"
)

// DuplicateSignalWindow is how close behind a signal the same signal must
// come to be taken for a second delivery of the first rather than a second
// request: supervisors such as GNU timeout send SIGTERM to a process and to
// its process group at once, which arrives twice within microseconds. A
// person pressing Ctrl-C twice is far slower than this, so a second signal
// 100 ms or more after the first always counts.
const DuplicateSignalWindow = 50 * time.Millisecond

// Coordinator turns shutdown requests into calls of registered callbacks.
// The first Trigger (or signal) calls the
// graceful callbacks; the second calls the hard-stop callbacks. Callbacks
// run on the triggering goroutine, in registration order, and should not
// block: start the slow part in a goroutine. Safe for concurrent use.
type Coordinator struct {
	// RepeatWindow, when positive, makes Listen ignore a signal that comes
	// within this long of the same signal before it: some supervisors (GNU
	// timeout, for one) deliver SIGTERM to a process and to its process
	// group at once, which must not count as a second signal. A different
	// signal always counts. Keep it short (DuplicateSignalWindow) so that a
	// person's second Ctrl-C is never absorbed. Set it before Listen.
	RepeatWindow time.Duration
	// Clock times RepeatWindow. Default: the system clock.
	Clock clock.Clock

	mu        sync.Mutex
	level     int // 0 none, 1 triggered, 2 escalated
	next      int
	callbacks []callback // in registration order
	done      chan struct{}
	escal     chan struct{}
}

// callback is a registered function and the trigger level it runs at.
type callback struct {
	id, level int
	f         func()
}

// NewCoordinator returns a coordinator that handles no signals until Listen
// is called.
func NewCoordinator() *Coordinator {
	return &Coordinator{done: make(chan struct{}), escal: make(chan struct{})}
}

// Registration is a registered callback.
type Registration struct {
	c  *Coordinator
	id int
}

// Unregister removes the callback. Safe to call more than once.
func (r Registration) Unregister() {
	if r.c == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.callbacks = slices.DeleteFunc(r.c.callbacks, func(cb callback) bool { return cb.id == r.id })
}

// Register adds a callback for the graceful shutdown. When shutdown has
// already been triggered it is called at once, before Register returns.
func (c *Coordinator) Register(f func()) Registration {
	return c.register(f, 1)
}

// OnEscalate adds a callback for the hard stop that a second trigger
// requests. When that has already happened it is called at once.
func (c *Coordinator) OnEscalate(f func()) Registration {
	return c.register(f, 2)
}

func (c *Coordinator) register(f func(), level int) Registration {
	c.mu.Lock()
	c.next++
	id := c.next
	c.callbacks = append(c.callbacks, callback{id: id, level: level, f: f})
	now := c.level >= level
	c.mu.Unlock()
	if now {
		f()
	}
	return Registration{c: c, id: id}
}

// Trigger requests shutdown: the first call runs the graceful callbacks,
// the second the hard-stop callbacks; later calls do nothing.
func (c *Coordinator) Trigger() {
	c.mu.Lock()
	if c.level >= 2 {
		c.mu.Unlock()
		return
	}
	c.level++
	ch := c.done
	if c.level == 2 {
		ch = c.escal
	}
	var calls []func()
	for _, cb := range c.callbacks {
		if cb.level == c.level {
			calls = append(calls, cb.f)
		}
	}
	close(ch)
	c.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

// Triggered returns a channel that is closed at the first trigger.
func (c *Coordinator) Triggered() <-chan struct{} { return c.done }

// Escalated returns a channel that is closed at the second trigger.
func (c *Coordinator) Escalated() <-chan struct{} { return c.escal }

// Listen makes the given signals (SIGTERM and SIGINT when none are given)
// trigger the coordinator, in the order they arrive, on one goroutine: the
// callbacks must not block, or they hold back the next signal. The returned
// function stops listening and restores the signals' default behaviour.
func (c *Coordinator) Listen(signals ...os.Signal) (stop func()) {
	if len(signals) == 0 {
		signals = []os.Signal{syscall.SIGTERM, os.Interrupt}
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, signals...)
	quit := make(chan struct{})
	clk := clock.OrSystem(c.Clock)
	var wg sync.WaitGroup
	wg.Go(func() {
		var last time.Duration
		var lastSig os.Signal
		for {
			select {
			case sig := <-ch:
				now := clk.Monotonic()
				if sig == lastSig && c.RepeatWindow > 0 && now-last < c.RepeatWindow {
					continue
				}
				lastSig, last = sig, now
				c.Trigger()
			case <-quit:
				return
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(quit)
			wg.Wait()
		})
	}
}
