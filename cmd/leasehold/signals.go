package main

import (
	"context"

	"github.com/leasehold/leasehold/lifecycle"
)

// runUntilSignal runs a loop until SIGTERM or SIGINT; a second signal
// stops it at once.
func (a *app) runUntilSignal(ctx context.Context, r lifecycle.Runnable) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	co := lifecycle.NewCoordinator()
	co.RepeatWindow = lifecycle.DuplicateSignalWindow
	unlisten := co.Listen()
	defer unlisten()
	co.Register(func() { go func() { _ = r.Shutdown(context.WithoutCancel(ctx)) }() })
	co.OnEscalate(stop)
	a.log.Debug("running until SIGTERM or SIGINT")
	return r.Run(ctx)
}
