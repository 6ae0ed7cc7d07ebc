package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/demoscene"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

// demoStopTimeout bounds the scene's stop after the server's: its workers
// finish the work in hand, a fraction of a second each.
const demoStopTimeout = 30 * time.Second

// demoServe sets the scene (internal/demoscene) on a SQLite file and
// serves its dashboard until SIGINT or SIGTERM. keep says that --db named
// the file, which stays; otherwise the file is temporary.
func (a *app) demoServe(ctx context.Context, addr string, keep bool) error {
	cfg := serve.Config{Addr: addr, Logger: a.log}
	if err := cfg.Check(); err != nil {
		return usageError{err}
	}
	d := a.dsn
	if keep && (d.postgres != "" || d.memory) {
		return usagef("demo --serve: --db names a %s; the scene runs on a SQLite file", d)
	}
	if !keep {
		dir, err := os.MkdirTemp("", "leasehold-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		d = dsn{path: filepath.Join(dir, "demo.db")}
	}
	st, err := openStore(ctx, d, openCreate)
	if err != nil {
		return err
	}
	defer st.Close()

	// A signal while the scene is set stops the setting, and the
	// temporary file is still removed.
	setCtx, stopSet := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	sc, err := demoscene.Start(setCtx, demoscene.Config{Store: st, Past: func(ctx context.Context, clk clock.Clock) (store.Store, error) {
		// The past is only the scene's: it is written without a sync
		// at each commit, for a quick start.
		return sqlite.Open(ctx, sqlite.Config{Path: d.path, Synchronous: "normal", Clock: clk})
	}})
	stopSet()
	if err != nil {
		if keep && errors.Is(err, demoscene.ErrInUse) {
			return usagef("demo --serve: %v", err)
		}
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), demoStopTimeout)
		defer cancel()
		if err := sc.Stop(sctx); err != nil {
			a.log.Error("demo: the scene's workers did not stop cleanly", "error", err)
		}
	}()

	cfg.Store = st
	s, err := serve.New(cfg)
	if err != nil {
		return usageError{err}
	}
	if err := s.Listen(); err != nil {
		return err
	}
	base := "http://" + s.Addr()
	fmt.Fprintf(a.stdout, `The demo scene's dashboard is at %s/
  %s, %s, %s: traffic that two workers complete, a few messages failing and retried
  %s/queues/%s/keys: %s's payments waiting behind a long settlement
  %s/queues/%s/messages/%d: a dead letter and its three errors
  %s: %d reports scheduled for later; %s: paused, its backlog growing
`, base, demoscene.Emails, demoscene.Payments, demoscene.Webhooks,
		base, demoscene.Payments, demoscene.LaneKey,
		base, demoscene.Webhooks, sc.DeadLetters[0],
		demoscene.Reports, demoscene.Delayed, demoscene.Thumbnails)
	if keep {
		fmt.Fprintf(a.stdout, "Ctrl-C stops it; the database %s is kept.\n", d.path)
	} else {
		fmt.Fprintln(a.stdout, "Ctrl-C stops it and removes its temporary database.")
	}
	return a.runUntilSignal(ctx, s)
}
