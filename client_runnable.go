package leasehold

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/lifecycle"
)

// Runnable returns the client as a lifecycle.Runnable, for a program that
// runs it in a lifecycle.Group beside loops of its own. Run starts the
// client unless it has started, and returns once it has stopped: through
// Shutdown, which stops it as Stop does, or through the end of Run's
// context, which stops it at once, as StopAndCancel does.
func (c *Client[TTx]) Runnable() lifecycle.Runnable { return &clientLoop[TTx]{c: c} }

type clientLoop[TTx any] struct {
	c     *Client[TTx]
	state runstate.State
}

func (l *clientLoop[TTx]) Run(ctx context.Context) error {
	ok, err := l.state.Begin()
	if !ok {
		return err
	}
	defer l.state.End()
	c := l.c
	r, err := c.startOnce(ctx)
	if err != nil {
		return err
	}
	select {
	case <-r.done:
	case <-l.state.Stopping():
		// Shutdown stops the client under its own context; this stop
		// covers a Shutdown that came before Start.
		_ = c.Stop(ctx)
	case <-ctx.Done():
		_ = c.StopAndCancel(context.WithoutCancel(ctx))
	}
	<-r.done
	if r.err != nil {
		return fmt.Errorf("leasehold: %w", r.err)
	}
	return nil
}

func (l *clientLoop[TTx]) Shutdown(ctx context.Context) error {
	l.state.RequestStop()
	err := l.c.Stop(ctx)
	if werr := l.state.Await(ctx); werr != nil && err == nil {
		err = fmt.Errorf("leasehold: shutdown: %w", werr)
	}
	return err
}

func (l *clientLoop[TTx]) Running() bool { return l.state.Running() }

// Ready is the client's readiness, a lifecycle.Check: nil while it works
// its queues and reaches its store; an error before Start, once it is
// stopping, or when the store does not answer.
func (c *Client[TTx]) Ready(ctx context.Context) error {
	r := c.started()
	if r == nil {
		return errors.New("leasehold: the client has not started")
	}
	return r.w.Ready(ctx)
}
