package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
)

// Runnable is a loop that runs until stopped. The runtime's worker,
// watchdog, reaper and upkeep implement it, and so can any user loop.
type Runnable interface {
	// Run runs the loop until it is done, Shutdown is called or ctx ends,
	// and returns nil after a clean stop. Ending ctx is a hard stop.
	Run(ctx context.Context) error
	// Shutdown asks the loop to stop gracefully and waits for it, at most
	// until ctx ends; it returns nil when the loop stopped cleanly. A ctx
	// that has already ended asks for a hard stop. It is safe before Run,
	// more than once and from several goroutines.
	Shutdown(ctx context.Context) error
	// Running reports whether Run is running.
	Running() bool
}

// DefaultShutdownTimeout is a Group's shutdown timeout by default.
const DefaultShutdownTimeout = 30 * time.Second

// Group runs several loops as one. When any loop
// returns, with or without an error, the group shuts the others down, as
// oklog/run does; Run returns the first loop's error.
type Group struct {
	loops   []Runnable
	timeout time.Duration
	clk     clock.Clock
	state   runstate.State
}

// GroupConfig configures a Group.
type GroupConfig struct {
	// ShutdownTimeout bounds a shutdown of all loops together. Default
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Clock times the shutdown. Default: the system clock.
	Clock clock.Clock
}

// NewGroup returns a group of loops.
func NewGroup(cfg GroupConfig, loops ...Runnable) (*Group, error) {
	if cfg.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("lifecycle: ShutdownTimeout is %s, must not be negative", cfg.ShutdownTimeout)
	}
	for i, l := range loops {
		if l == nil {
			return nil, fmt.Errorf("lifecycle: loop %d is nil", i)
		}
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	return &Group{loops: loops, timeout: cfg.ShutdownTimeout, clk: clock.OrSystem(cfg.Clock)}, nil
}

// Run runs every loop in its own goroutine. When the first one returns, or
// Shutdown is called, it shuts the others down within the shutdown timeout
// and waits for all of them. It returns the first loop's error; when that is
// nil, the first error of another loop; when the group was shut down, nil
// unless a loop failed.
func (g *Group) Run(ctx context.Context) error {
	ok, err := g.state.Begin()
	if !ok {
		return err
	}
	defer g.state.End()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(g.loops))
	for i, l := range g.loops {
		go func() { results <- result{i, l.Run(ctx)} }()
	}
	var first error
	pending := len(g.loops)
	if pending == 0 {
		<-g.state.Stopping()
	} else {
		select {
		case r := <-results:
			pending--
			first = r.err
			if r.err != nil {
				first = fmt.Errorf("lifecycle: loop %d: %w", r.i, r.err)
			}
		case <-g.state.Stopping():
		}
	}
	// How the others stopped shows in their Run results; Shutdown reports
	// it to its own caller.
	_ = g.shutdownLoops(ctx)
	var rest []error
	for range pending {
		if r := <-results; r.err != nil {
			rest = append(rest, fmt.Errorf("lifecycle: loop %d: %w", r.i, r.err))
		}
	}
	if first != nil {
		return first
	}
	if len(rest) > 0 {
		return rest[0]
	}
	return nil
}

// shutdownLoops shuts every loop down at once within the group's timeout,
// or at once when ctx has ended.
func (g *Group) shutdownLoops(ctx context.Context) error {
	sctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), g.clk, g.timeout)
	defer cancel()
	if ctx.Err() != nil {
		cancel() // a hard stop
	}
	return g.shutdownAll(sctx)
}

func (g *Group) shutdownAll(ctx context.Context) error {
	errs := make([]error, len(g.loops))
	var wg sync.WaitGroup
	for i, l := range g.loops {
		wg.Go(func() {
			if err := l.Shutdown(ctx); err != nil {
				errs[i] = fmt.Errorf("loop %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Shutdown stops every loop gracefully within one shared timeout (the
// group's, or ctx's when that ends sooner) and waits for Run to return. It
// returns nil when every loop stopped cleanly. A ctx that has already ended
// makes it a hard stop. Safe before Run, more than once and from several
// goroutines.
func (g *Group) Shutdown(ctx context.Context) error {
	sctx, cancel := clock.WithTimeout(ctx, g.clk, g.timeout)
	defer cancel()
	g.state.RequestStop()
	err := g.shutdownAll(sctx)
	if werr := g.state.Await(sctx); werr != nil {
		err = errors.Join(err, werr)
	}
	if err != nil {
		return fmt.Errorf("lifecycle: shutdown: %w", err)
	}
	return nil
}

// Running reports whether Run is running.
func (g *Group) Running() bool { return g.state.Running() }
