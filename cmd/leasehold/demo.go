package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/sqlite"
)

const (
	demoQueue  = "demo-orders"
	demoCrashQ = "demo-crash"
	demoFenceQ = "demo-fencing"
	demoKeys   = 3
	demoPerKey = 4
	demoLease  = 2 * time.Second
	// demoSettleLease is the lease of a claim the tour completes at once:
	// long, so that a loaded machine (or another reaper on the file) cannot
	// take the message back between the claim and its completion.
	demoSettleLease = time.Minute
	demoTimeout     = 50 * time.Second
)

func (a *app) demoCommand() *cobra.Command {
	var serveScene bool
	var addr string
	cmd := &cobra.Command{
		Use:   "demo [--serve [--addr HOST:PORT]]",
		Short: "A self-contained tour on a temporary SQLite database, or a live scene in the dashboard",
		Long: `demo shows leasehold at work on a temporary SQLite database that it removes
afterwards: keyed work processed in order by two workers, a worker process
killed in the middle of a job and its message recovered by the reaper, a
poison message dead-lettered, and a stale worker's completion refused by
fencing. It ends with a summary table and takes well under a minute.

With --serve, demo sets a scene instead and serves the dashboard of it,
as "leasehold serve" does, until SIGINT or SIGTERM: queues with an hour
of traffic behind them, which two workers in the process go on
completing, a few messages failing and retried; a customer's payments
waiting behind a long settlement; webhooks dead after three deliveries,
each with an error of its own; reports scheduled for later; and a paused
queue gathering a backlog. It prints the dashboard's address. The
database is a temporary SQLite file removed at the end,
unless --db names a SQLite file to keep (new, or one without queues).`,
		Example: `  leasehold demo
  go run ./cmd/leasehold demo
  leasehold demo --serve
  leasehold --db scene.db demo --serve --addr 127.0.0.1:8080`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serveScene {
				return a.demoServe(cmd.Context(), addr, cmd.Flags().Changed("db"))
			}
			if cmd.Flags().Changed("addr") {
				return usagef("--addr goes with --serve")
			}
			// A signal ends the tour early; it still cleans up after itself.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, demoTimeout)
			defer cancel()
			return a.demo(ctx)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&serveScene, "serve", false, "set a live scene and serve its dashboard until SIGINT or SIGTERM, instead of the tour")
	fl.StringVar(&addr, "addr", serve.DefaultAddr, "with --serve: the loopback address to serve the dashboard on, HOST:PORT (port 0: any free one)")
	return cmd
}

// demo is the tour. Its database lives in a temporary directory that is
// removed at the end.
func (a *app) demo(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "leasehold-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "demo.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	out := newProgress(a.stdout)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clock.System()
	started := clk.Monotonic()

	// 1. Keyed work.
	out.step("1. enqueue %d orders for each of %d customers (key = customer): each customer's orders must run one at a time, in order", demoPerKey, demoKeys)
	var msgs []store.NewMessage
	for step := 1; step <= demoPerKey; step++ {
		for k := 1; k <= demoKeys; k++ {
			msgs = append(msgs, store.NewMessage{Queue: demoQueue, Key: fmt.Sprintf("customer-%d", k), Payload: fmt.Appendf(nil, "order %d", step)})
		}
	}
	msgs = append(msgs, store.NewMessage{Queue: demoQueue, Payload: []byte("poison"), MaxDeliveries: 3})
	if _, err := st.Enqueue(ctx, msgs); err != nil {
		return err
	}
	out.line("   %d messages enqueued, plus one poison message that always fails (3 deliveries allowed)", len(msgs)-1)

	// 2. Two workers.
	out.step("2. run two workers, 3 handlers each, on a %s lease kept alive by heartbeats", demoLease)
	var mu sync.Mutex
	order := map[string][]string{}
	var inOrder atomic.Bool
	inOrder.Store(true)
	handler := worker.HandlerFunc(func(ctx context.Context, m *worker.Message) error {
		if string(m.Payload) == "poison" {
			return fmt.Errorf("cannot parse %q (attempt %d)", m.Payload, m.Attempt)
		}
		select {
		case <-clk.NewTimer(150 * time.Millisecond).C():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		mu.Lock()
		defer mu.Unlock()
		want := fmt.Sprintf("order %d", len(order[m.Key])+1)
		if string(m.Payload) != want {
			inOrder.Store(false)
		}
		order[m.Key] = append(order[m.Key], string(m.Payload))
		return nil
	})
	var workers []*worker.Worker
	runs := make(chan error, 2)
	for i := range 2 {
		// The tour runs its reaper itself, in step 4, to show it at work.
		// Polls and retries are quicker than a client's, for a tour of a few
		// seconds.
		w, err := worker.New(worker.Config{Deps: maintenance.Deps{Store: st, Clock: clk, Logger: quiet, Meter: maintenance.Meter(nil)},
			Queues: []worker.QueueConfig{{Name: demoQueue, Concurrency: 3}}, Handler: handler, WorkerID: fmt.Sprintf("demo-worker-%d", i+1),
			LeaseDuration: demoLease, HeartbeatInterval: demoLease / 3, MaxProcessingTime: 3 * demoLease,
			Backoff:  backoff.Exponential{Initial: 100 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: backoff.NoJitter},
			LongPoll: time.Second, PollInterval: 100 * time.Millisecond,
			ShutdownTimeout: worker.DefaultShutdownTimeout, HardStopWait: worker.DefaultHardStopWait})
		if err != nil {
			return err
		}
		workers = append(workers, w)
		go func() { runs <- w.Run(ctx) }()
	}
	stopWorkers := func() error {
		var errs []error
		for _, w := range workers {
			errs = append(errs, w.Shutdown(ctx))
		}
		for range workers {
			errs = append(errs, <-runs)
		}
		workers = nil
		return errors.Join(errs...)
	}
	defer func() { _ = stopWorkers() }()
	total := int64(demoKeys * demoPerKey)
	if err := out.waitFor(ctx, "orders completed", total, func() (int64, error) {
		s, err := st.Stats(ctx, demoQueue)
		return s.Completed, err
	}); err != nil {
		return err
	}
	out.line("   every customer's orders ran in order: %v", inOrder.Load())

	// 3. The poison message.
	out.step("3. the poison message fails on every delivery and goes to the dead letters")
	if err := out.waitFor(ctx, "dead letters", 1, func() (int64, error) {
		s, err := st.Stats(ctx, demoQueue)
		return s.Dead, err
	}); err != nil {
		return err
	}
	dls, err := store.ListDeadLetters(ctx, st, demoQueue, 0, 10)
	if err != nil {
		return err
	}
	for _, d := range dls {
		out.line("   dead letter %d: %s after %d deliveries: %s", d.ID, d.Reason, d.Deliveries, d.LastError)
	}

	// 4. A worker process killed mid-job.
	out.step("4. start a worker process on a job, kill it with SIGKILL in the middle, and watch the reaper recover the job")
	recovered, err := a.demoCrash(ctx, st, path, out, quiet)
	if err != nil {
		return err
	}

	// 5. Fencing.
	out.step("5. a stale worker tries to complete a message whose lease it lost")
	refused, err := demoFencing(ctx, st, out)
	if err != nil {
		return err
	}

	if err := stopWorkers(); err != nil {
		return err
	}
	out.step("summary (%.1f s)", (clk.Monotonic() - started).Seconds())
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tCOMPLETED\tDEAD\tPENDING\tPROCESSING")
	for _, q := range []string{demoQueue, demoCrashQ, demoFenceQ} {
		s, err := st.Stats(ctx, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", q, s.Completed, s.Dead, s.Pending, s.Processing)
	}
	fmt.Fprintf(tw, "\t\t\t\t\n")
	fmt.Fprintf(tw, "keyed orders in order\t%v\t\t\t\n", inOrder.Load())
	fmt.Fprintf(tw, "recovered by the reaper\t%d\t\t\t\n", recovered)
	fmt.Fprintf(tw, "stale completions refused\t%d\t\t\t\n", refused)
	if err := tw.Flush(); err != nil {
		return err
	}
	out.line("the temporary database is removed; nothing is left behind")
	return nil
}

// demoCrash runs `leasehold work` as a child process on a slow job, kills
// it, and recovers the job with a reaper and a worker in this process. It
// returns how many messages the reaper recovered.
func (a *app) demoCrash(ctx context.Context, st store.Store, path string, out *progress, log *slog.Logger) (int, error) {
	res, err := st.Enqueue(ctx, []store.NewMessage{{Queue: demoCrashQ, Payload: []byte("slow job")}})
	if err != nil {
		return 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	// The job runs until its worker dies: the script watches its parent,
	// so nothing is left behind when the worker is killed.
	child := exec.Command(self, "--db", "sqlite:"+path, "--log-level", "error", "work", "--queue", demoCrashQ,
		"--lease", demoLease.String(), "--", "sh", "-c", "while kill -0 $PPID 2>/dev/null; do sleep 0.1; done")
	child.Stdout, child.Stderr = io.Discard, io.Discard
	if err := child.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	if err := out.waitFor(ctx, "job claimed by the worker process", 1, func() (int64, error) {
		s, err := st.Stats(ctx, demoCrashQ)
		return s.Processing, err
	}); err != nil {
		return 0, err
	}
	if err := child.Process.Kill(); err != nil {
		return 0, err
	}
	out.line("   worker process %d killed while message %d was in flight; its lease runs out in %s", child.Process.Pid, res[0].ID, demoLease)
	r, err := maintenance.NewReaper(maintenance.ReaperConfig{Deps: a.deps(st, log)})
	if err != nil {
		return 0, err
	}
	// Any reaper on the database may take the job back (another process's,
	// say), so the job is recovered once it is pending again, whoever
	// reaped it.
	recovered := 0
	t := clock.System().NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for recovered == 0 {
		rec, err := r.RunOnce(ctx)
		if err != nil {
			return 0, err
		}
		for _, m := range rec {
			if m.ID == res[0].ID {
				recovered++
				out.line("   reaper: message %d recovered after its lease had expired %s ago", m.ID, m.StuckFor.Round(time.Millisecond))
			}
		}
		if recovered == 0 {
			s, err := st.Stats(ctx, demoCrashQ)
			if err != nil {
				return 0, err
			}
			if s.Pending > 0 {
				recovered++
				out.line("   reaper: message %d recovered after its lease had expired (by another process's reaper)", res[0].ID)
				break
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the reaper: %w", ctx.Err())
		case <-t.C():
		}
	}
	msgs, err := demoMailbox(st, demoCrashQ, "demo-rescuer").Receive(ctx, mailbox.ReceiveOptions{Max: 1, Visibility: demoSettleLease, Wait: 5 * time.Second})
	if err != nil || len(msgs) == 0 {
		return 0, fmt.Errorf("receive the recovered job: %v", err)
	}
	if err := demoComplete(ctx, st, msgs[0].Lease); err != nil {
		return 0, err
	}
	out.line("   another worker took it at once (delivery %d) and completed it", msgs[0].Attempt)
	return recovered, nil
}

// demoMailbox receives from queue as the worker id, as a worker would.
func demoMailbox(st store.Store, queue, id string) *mailbox.Mailbox {
	return mailbox.New(mailbox.Config{Store: st, Queue: queue, WorkerID: id, PollInterval: mailbox.DefaultPollInterval, Clock: clock.System()})
}

// demoComplete completes the message of lease, as its worker would; the
// store refuses a lease that is no longer current.
func demoComplete(ctx context.Context, st store.Store, l store.Lease) error {
	errs, err := st.Complete(ctx, []store.Completion{{Lease: l}})
	if err != nil {
		return err
	}
	return errs[0]
}

// demoFencing shows a stale completion refused. It returns how many were.
func demoFencing(ctx context.Context, st store.Store, out *progress) (int, error) {
	if _, err := st.Enqueue(ctx, []store.NewMessage{{Queue: demoFenceQ, Payload: []byte("fenced")}}); err != nil {
		return 0, err
	}
	stale, fresh := demoMailbox(st, demoFenceQ, "demo-stale"), demoMailbox(st, demoFenceQ, "demo-fresh")
	first, err := stale.Receive(ctx, mailbox.ReceiveOptions{Max: 1, Visibility: 300 * time.Millisecond, Wait: time.Second})
	if err != nil || len(first) == 0 {
		return 0, fmt.Errorf("receive: %v", err)
	}
	out.line("   worker A holds message %d with fencing token %d and stalls past its 300ms lease", first[0].MessageID, first[0].FencingToken)
	select {
	case <-clock.System().NewTimer(400 * time.Millisecond).C():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if _, err := st.Reap(ctx); err != nil {
		return 0, err
	}
	second, err := fresh.Receive(ctx, mailbox.ReceiveOptions{Max: 1, Visibility: demoSettleLease, Wait: 2 * time.Second})
	if err != nil || len(second) == 0 {
		return 0, fmt.Errorf("receive again: %v", err)
	}
	out.line("   worker B claims it again with fencing token %d", second[0].FencingToken)
	refused := 0
	if err := demoComplete(ctx, st, first[0].Lease); errors.Is(err, store.ErrLeaseLost) {
		refused++
		out.line("   worker A's completion is refused: %v", err)
	} else {
		return 0, fmt.Errorf("the stale completion was not refused: %v", err)
	}
	if err := demoComplete(ctx, st, second[0].Lease); err != nil {
		return 0, err
	}
	out.line("   worker B's completion goes through: the message completed once")
	return refused, nil
}

// progress writes the tour: plain lines, and on a terminal a live counter
// while it waits.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) step(format string, args ...any) {
	fmt.Fprintf(p.w, "\n"+format+"\n", args...)
}

func (p *progress) line(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }

// waitFor polls count until it reaches want, showing it live on a terminal.
func (p *progress) waitFor(ctx context.Context, what string, want int64, count func() (int64, error)) error {
	t := clock.System().NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := count()
		if err != nil {
			return err
		}
		if p.tty {
			fmt.Fprintf(p.w, "\r   %s: %d/%d", what, n, want)
		}
		if n >= want {
			if p.tty {
				fmt.Fprintln(p.w)
			} else {
				p.line("   %s: %d/%d", what, n, want)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C():
		}
	}
}
