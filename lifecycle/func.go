package lifecycle

import (
	"context"

	"github.com/leasehold/leasehold/internal/runstate"
)

// Func makes a Runnable of run, a loop of one's own: Run calls run with a
// context that ends when Shutdown is called or Run's own context ends, and
// run should return soon after. The Runnable keeps the rules of the
// interface (Run once, Shutdown before Run, more than once and from any
// goroutine), so a loop need not keep that bookkeeping itself.
func Func(run func(ctx context.Context) error) Runnable { return &funcLoop{run: run} }

type funcLoop struct {
	run   func(ctx context.Context) error
	state runstate.State
}

func (f *funcLoop) Run(ctx context.Context) error {
	ok, err := f.state.Begin()
	if !ok {
		return err
	}
	defer f.state.End()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopping := f.state.Stopping()
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return f.run(ctx)
}

func (f *funcLoop) Shutdown(ctx context.Context) error { return f.state.Shutdown(ctx) }
func (f *funcLoop) Running() bool                      { return f.state.Running() }
