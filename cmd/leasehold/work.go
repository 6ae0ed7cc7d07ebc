package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/cmd/leasehold/internal/script"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// drainPoll is how often --drain looks at the queue: a count of its
// messages by state, read through indexes, so often enough that a short
// drain does not wait long after its last message.
const drainPoll = 50 * time.Millisecond

var errStalled = errors.New("watchdog: the worker loop stalled")

// maxLease bounds --lease: a week, far beyond any sensible lease, and far
// from overflowing 3 x --lease.
const maxLease = 7 * 24 * time.Hour

type workFlags struct {
	queue                                      string
	concurrency                                int
	lease, heartbeat, maxProcessing, reapEvery time.Duration
	shutdownTimeout                            time.Duration
	drain                                      bool
	user                                       string
	retainCompleted, retainDead                retention
	periodic                                   []string
}

func (a *app) workCommand() *cobra.Command {
	f := workFlags{retainCompleted: retention{maintenance.DefaultCompletedRetention}, retainDead: retention{maintenance.DefaultDeadRetention}}
	cmd := &cobra.Command{
		Use:   "work --queue Q [flags] -- CMD [ARGS...]",
		Short: "Run a program once per message",
		Long: `work claims messages of the queue and runs CMD once per message, with the
payload on standard input and these environment variables:
LEASEHOLD_MESSAGE_ID, LEASEHOLD_QUEUE, LEASEHOLD_KEY, LEASEHOLD_ATTEMPT,
LEASEHOLD_FENCING_TOKEN. CMD gets the worker's environment without
leasehold's own settings (LEASEHOLD_DB and every other LEASEHOLD_ variable)
and without PGPASSWORD, so a database password never reaches it; the worker
is non-dumpable, so that CMD cannot read them from /proc either. CMD runs
as the worker's user and reads what that user can (the SQLite file,
~/.pgpass); a worker running as root runs it as root, which reads
everything. With --user NAME, which needs a worker running as root, CMD
runs as NAME with NAME's groups, HOME, USER and LOGNAME instead, and
reaches nothing of the worker's that NAME may not read.

Exit 0 completes the message; exit 65 (EX_DATAERR) dead-letters it at once;
any other status fails it: it is retried with backoff until its deliveries
are used up, then dead-lettered, with the tail of CMD's standard error as the
recorded error. For a message with a reply-to queue, CMD's standard output is
the reply, at most ` + strconv.Itoa(worker.MaxReplyOutput) + ` bytes (more dead-letters the message
with "reply over N bytes", and the reply says so); otherwise it is passed
through, as is CMD's standard error, a whole line at a time so that lines of
concurrent messages never mix (a line over 64 KiB is split, and a warning
says so).

Everything CMD starts ends with it. The worker forks every CMD through one
supervising leasehold process, in a session of its own and with
LEASEHOLD_RUN in its environment, which ties what it starts to its run:
when CMD exits, whatever it left running (daemons that called setsid
included) is killed, and its output is closed at most 2 s later (a process
that left the session and dropped LEASEHOLD_RUN is killed once every CMD
that was running when it was found has ended); when the worker dies by
any means, kill -9 included, its commands and everything they started are
killed at once; when a CMD kills the supervising process, the worker kills
what every running CMD started and fails their messages. The lease is kept
alive while CMD runs. When it is lost, or the maximum processing time
passes, CMD gets SIGTERM, then SIGKILL 5 s later, and the message is not
completed by this worker. The reaper runs in-process.

A CMD that cannot be started (missing, not executable, a bad interpreter)
is not the message's fault: the message goes back to the queue without
using up a delivery, and once 3 starts in a row have failed the worker
stops and exits 1.

SIGTERM or SIGINT starts a graceful shutdown (exit 0 once everything in
flight finished); a second signal stops at once, releasing the leases, and
exits non-zero.`,
		Example: `  leasehold work --queue emails -- ./send-email.sh
  leasehold work --queue thumbs --concurrency 4 --lease 2m -- convert - -resize 64x64 png:-
  leasehold work --queue batch --drain -- sh -c 'wc -c'
  leasehold work --queue reports --periodic '0 6 * * *|daily' -- ./report.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			at := cmd.ArgsLenAtDash()
			if at < 0 || at == len(args) {
				return usagef("missing command after --: leasehold work --queue Q -- CMD [ARGS...]")
			}
			if at > 0 {
				return usagef("unexpected argument %q before --", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config(cmd)
			if err != nil {
				return err
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return usagef("command %q: %v", args[0], err)
			}
			var runAs *script.User
			if f.user != "" {
				if runAs, err = script.LookupUser(f.user); err != nil {
					return usageError{err}
				}
			}
			return a.work(cmd.Context(), cfg, f, runAs, append([]string{path}, args[1:]...))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue to work (required)")
	fl.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "messages handled at once")
	fl.DurationVar(&f.lease, "lease", worker.DefaultLeaseDuration, "lease duration, at least 1s: heartbeats renew it every third of it")
	fl.DurationVar(&f.heartbeat, "heartbeat", 0, "lease extension interval, at most a third of --lease (default a third of --lease: 10s)")
	fl.DurationVar(&f.maxProcessing, "max-processing", 0, "longest run of CMD, at least --lease (default 3 x --lease)")
	fl.DurationVar(&f.reapEvery, "reap-interval", 0, "reaper interval, below --lease (default 10s, or half of a shorter --lease)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", worker.DefaultShutdownTimeout, "how long a graceful shutdown waits for running commands")
	fl.StringArrayVar(&f.periodic, "periodic", nil, "enqueue PAYLOAD on the queue at every tick of SCHEDULE, given as 'SCHEDULE|PAYLOAD' (a cron expression or 'every DURATION'); repeatable. Workers with the same value enqueue each tick once between them")
	fl.Var(&f.retainCompleted, "retain-completed", "keep completed messages this long after they finish, then delete them (or forever)")
	fl.Var(&f.retainDead, "retain-dead", "keep dead and cancelled messages this long after they end, then delete them (or forever)")
	fl.StringVar(&f.user, "user", "", "run CMD as this user (a name or uid), with its groups; the worker must run as root")
	fl.BoolVar(&f.drain, "drain", false, "exit 0 once the queue has nothing pending (visible or delayed) and nothing in flight, or is paused with nothing in flight")
	return cmd
}

// config checks the flags and turns them into the client's configuration.
// The client's own checks name what is left.
func (f workFlags) config(cmd *cobra.Command) (leasehold.Config, error) {
	if err := requireQueue(f.queue); err != nil {
		return leasehold.Config{}, err
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--lease", f.lease}, {"--heartbeat", f.heartbeat}, {"--max-processing", f.maxProcessing},
		{"--reap-interval", f.reapEvery}, {"--shutdown-timeout", f.shutdownTimeout}} {
		if d.d < 0 {
			return leasehold.Config{}, usagef("%s %s: must not be negative", d.name, d.d)
		}
	}
	if f.lease < worker.MinLeaseDuration || f.lease > maxLease {
		return leasehold.Config{}, usagef("--lease %s: must be %s to %s (heartbeats every third of a shorter lease cannot keep it)", f.lease, worker.MinLeaseDuration, maxLease)
	}
	if cmd.Flags().Changed("max-processing") && f.maxProcessing < f.lease {
		return leasehold.Config{}, usagef("--max-processing %s: must be at least --lease %s (leave it out for 3 x --lease)", f.maxProcessing, f.lease)
	}
	if f.concurrency < 1 || f.concurrency > store.MaxBatch {
		return leasehold.Config{}, usagef("--concurrency %d: must be 1 to %d", f.concurrency, store.MaxBatch)
	}
	hb := f.heartbeat
	if !cmd.Flags().Changed("heartbeat") {
		hb = f.lease / 3
	} else if hb == 0 || 3*hb > f.lease {
		return leasehold.Config{}, usagef("--heartbeat %s: must be positive and at most a third of --lease %s (%s)", hb, f.lease, f.lease/3)
	}
	if f.shutdownTimeout == 0 {
		return leasehold.Config{}, usagef("--shutdown-timeout 0: must be positive")
	}
	if cmd.Flags().Changed("reap-interval") && (f.reapEvery == 0 || f.reapEvery >= f.lease) {
		return leasehold.Config{}, usagef("--reap-interval %s: must be positive and below --lease %s", f.reapEvery, f.lease)
	}
	cfg := leasehold.Config{Queues: map[string]leasehold.QueueConfig{f.queue: {Concurrency: f.concurrency}},
		LeaseDuration: f.lease, HeartbeatInterval: hb, MaxProcessingTime: f.maxProcessing, ReapInterval: f.reapEvery,
		CompletedRetention: f.retainCompleted.d, DeadRetention: f.retainDead.d,
		ShutdownTimeout: f.shutdownTimeout,
		// A hard stop waits for scripts to be killed (SIGTERM, then SIGKILL
		// after script.KillGrace) before it releases their leases, so that no
		// script runs on after its message was handed to another worker.
		HardStopWait: script.StopTime + time.Second, Codec: rawCodec{}}
	for _, v := range f.periodic {
		p, err := parsePeriodic(f.queue, v)
		if err != nil {
			return leasehold.Config{}, err
		}
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, p)
	}
	if err := cfg.Validate(); err != nil {
		return leasehold.Config{}, usageError{err}
	}
	return cfg, nil
}

// work runs a client whose raw handler is the script, for jobs of every
// kind, until a signal, --drain, a stall or a command that cannot start
// stops it.
func (a *app) work(ctx context.Context, cfg leasehold.Config, f workFlags, runAs *script.User, argv []string) error {
	if err := script.PrepareWorker(); err != nil {
		return err
	}
	st, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cfg.Logger = a.log
	cfg.OnStall = func([]string) {
		stop(errStalled)
		// The hard stop releases the leases and ends the process; if it
		// cannot (the stall is in the stop's path too), the process ends
		// anyway, so that an orchestrator restarts it.
		clock.System().AfterFunc(f.shutdownTimeout+2*script.KillGrace+10*time.Second, func() {
			a.log.Error("stalled worker did not stop; exiting")
			os.Exit(exitFailure)
		})
	}
	c, err := leasehold.NewClient(store.WithoutTx(st), cfg)
	if err != nil {
		return err
	}
	// --drain and a command that cannot start ask for a graceful stop,
	// which a watcher of the run makes; work waits for the watchers.
	stopAsked := make(chan struct{})
	var askOnce sync.Once
	askStop := func() { askOnce.Do(func() { close(stopAsked) }) }
	var cannotStart error
	var startMu sync.Mutex
	handler := &script.Handler{Argv: argv, User: runAs, Stdout: script.NewLockedWriter(a.stdout), Stderr: script.NewLockedWriter(a.stderr), Log: a.log,
		Broken: func(err error) {
			startMu.Lock()
			cannotStart = err
			startMu.Unlock()
			a.log.Error("the command failed to start several times in a row; stopping", "error", err, "failed_starts", script.MaxStartFailures)
			askStop()
		}}
	// Closed once no message runs any more (deferred calls run last in
	// first): the supervisor ends with nothing left to kill.
	defer handler.Close()
	c.HandleAny(handler.Handle)
	// A reader of standard output that goes away must not kill the worker
	// with SIGPIPE while it holds leases.
	signal.Ignore(syscall.SIGPIPE)
	watchCtx, endWatch := context.WithCancel(runCtx)
	var watchers sync.WaitGroup
	defer func() {
		endWatch()
		watchers.Wait()
	}()
	// RunUntilSignal starts the client once it listens for signals, so
	// that no signal in between takes its default action and kills the
	// worker; what needs the client running waits for it here.
	watchers.Go(func() {
		if !running(watchCtx, c) {
			return
		}
		a.log.Info("worker started", "queue", f.queue, "concurrency", f.concurrency, "db", a.dsn.String())
		if f.drain {
			watchers.Go(func() {
				if waitEmpty(watchCtx, st, f.queue, a.log) {
					askStop()
				}
			})
		}
		select {
		case <-stopAsked:
			_ = c.Stop(context.WithoutCancel(ctx)) // RunUntilSignal reports how it went
		case <-watchCtx.Done():
		}
	})
	err = c.RunUntilSignal(runCtx)
	startMu.Lock()
	if cannotStart != nil {
		err = errors.Join(fmt.Errorf("%w (%d times in a row; the messages it was given went back without using up a delivery)", cannotStart, script.MaxStartFailures), err)
	}
	startMu.Unlock()
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = errors.Join(cause, err)
	}
	return err
}

// running waits until the client works its queues and reports true then;
// false when ctx ends first.
func running[TTx any](ctx context.Context, c *leasehold.Client[TTx]) bool {
	t := clock.System().NewTicker(startPoll)
	defer t.Stop()
	for c.Ready(ctx) != nil {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
		}
	}
	return true
}

// startPoll is how often work looks whether its client has started.
const startPoll = 10 * time.Millisecond

// waitEmpty waits until the queue is empty, or paused with nothing in
// flight, and reports true then; false when ctx ends first.
func waitEmpty(ctx context.Context, st store.Store, queue string, log *slog.Logger) bool {
	t := clock.System().NewTicker(drainPoll)
	defer t.Stop()
	for {
		s, err := st.Stats(ctx, queue)
		if err == nil && s.Processing == 0 && s.Paused {
			log.Info("--drain: the queue is paused; stopping", "pending", s.Pending+s.Waiting)
			return true
		}
		if err == nil && s.Pending+s.Waiting+s.Processing == 0 {
			return true
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("--drain could not count the queue; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
		}
	}
}
