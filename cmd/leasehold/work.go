package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/runstate"
	"github.com/leasehold/leasehold/lifecycle"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/worker"
)

// Script exit statuses with a meaning.
const (
	// exitDataErr (EX_DATAERR) from a script dead-letters its message at
	// once.
	exitDataErr = 65
	// killGrace is how long a script has between SIGTERM and SIGKILL.
	killGrace = 5 * time.Second
	// stderrTail is how much of a failed script's stderr is recorded.
	stderrTail = 2048
	// drainPoll is how often --drain looks at the queue.
	drainPoll = 250 * time.Millisecond
)

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
}

func (a *app) workCommand() *cobra.Command {
	var f workFlags
	cmd := &cobra.Command{
		Use:   "work --queue Q [flags] -- CMD [ARGS...]",
		Short: "Run a program once per message",
		Long: `work claims messages of the queue and runs CMD once per message, with the
payload on standard input and these environment variables:
LEASEHOLD_MESSAGE_ID, LEASEHOLD_QUEUE, LEASEHOLD_KEY, LEASEHOLD_ATTEMPT,
LEASEHOLD_FENCING_TOKEN.

Exit 0 completes the message; exit 65 (EX_DATAERR) dead-letters it at once;
any other status fails it: it is retried with backoff until its deliveries
are used up, then dead-lettered, with the tail of CMD's standard error as the
recorded error. For a message with a reply-to queue, CMD's standard output is
the reply; otherwise it is passed through.

The lease is kept alive while CMD runs. When it is lost, or the maximum
processing time passes, CMD gets SIGTERM, then SIGKILL 5 s later, and the
message is not completed by this worker. The reaper runs in-process.

SIGTERM or SIGINT starts a graceful shutdown (exit 0 once everything in
flight finished); a second signal stops at once, releasing the leases, and
exits non-zero.`,
		Example: `  leasehold work --queue emails -- ./send-email.sh
  leasehold work --queue thumbs --concurrency 4 --lease 2m -- convert - -resize 64x64 png:-
  leasehold work --queue batch --drain -- sh -c 'wc -c'`,
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
			return a.work(cmd.Context(), cfg, f, append([]string{path}, args[1:]...))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue to work (required)")
	fl.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "messages handled at once")
	fl.DurationVar(&f.lease, "lease", worker.DefaultLeaseDuration, "lease duration")
	fl.DurationVar(&f.heartbeat, "heartbeat", 0, "lease extension interval, at most a third of --lease (default a third of --lease: 10s)")
	fl.DurationVar(&f.maxProcessing, "max-processing", 0, "longest run of CMD (default 3 x --lease)")
	fl.DurationVar(&f.reapEvery, "reap-interval", 0, "reaper interval, below --lease (default 10s, or half of a shorter --lease)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", worker.DefaultShutdownTimeout, "how long a graceful shutdown waits for running commands")
	fl.BoolVar(&f.drain, "drain", false, "exit 0 once the queue has nothing pending (visible or delayed) and nothing in flight")
	return cmd
}

// config checks the flags and turns them into a worker configuration
// without a store or handler.
func (f workFlags) config(cmd *cobra.Command) (worker.Config, error) {
	if err := requireQueue(f.queue); err != nil {
		return worker.Config{}, err
	}
	for name, d := range map[string]time.Duration{"--lease": f.lease, "--heartbeat": f.heartbeat, "--max-processing": f.maxProcessing,
		"--reap-interval": f.reapEvery, "--shutdown-timeout": f.shutdownTimeout} {
		if d < 0 {
			return worker.Config{}, usagef("%s %s: must not be negative", name, d)
		}
	}
	if f.lease < store.MinLease || f.lease > maxLease {
		return worker.Config{}, usagef("--lease %s: must be %s to %s", f.lease, store.MinLease, maxLease)
	}
	if cmd.Flags().Changed("max-processing") && f.maxProcessing == 0 {
		return worker.Config{}, usagef("--max-processing 0: must be positive (leave it out for 3 x --lease)")
	}
	if f.concurrency < 1 || f.concurrency > store.MaxBatch {
		return worker.Config{}, usagef("--concurrency %d: must be 1 to %d", f.concurrency, store.MaxBatch)
	}
	hb := f.heartbeat
	if !cmd.Flags().Changed("heartbeat") {
		hb = f.lease / 3
	} else if hb == 0 || 3*hb > f.lease {
		return worker.Config{}, usagef("--heartbeat %s: must be positive and at most a third of --lease %s (%s)", hb, f.lease, f.lease/3)
	}
	if f.shutdownTimeout == 0 {
		return worker.Config{}, usagef("--shutdown-timeout 0: must be positive")
	}
	if cmd.Flags().Changed("reap-interval") && (f.reapEvery == 0 || f.reapEvery >= f.lease) {
		return worker.Config{}, usagef("--reap-interval %s: must be positive and below --lease %s", f.reapEvery, f.lease)
	}
	cfg := worker.Config{Queue: f.queue, Concurrency: f.concurrency, LeaseDuration: f.lease,
		LeaseExtender:     &worker.LeaseExtenderConfig{Enabled: true, Interval: hb, Extension: f.lease},
		MaxProcessingTime: f.maxProcessing, ReapInterval: f.reapEvery, ShutdownTimeout: f.shutdownTimeout}
	if err := cfg.Validate(); err != nil {
		return worker.Config{}, usageError{err}
	}
	return cfg, nil
}

// work runs the worker until a signal, --drain or a failure stops it.
func (a *app) work(ctx context.Context, cfg worker.Config, f workFlags, argv []string) error {
	st, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg.Store, cfg.Logger = st, a.log
	cfg.Handler = &scriptHandler{argv: argv, stdout: &lockedWriter{w: a.stdout}, stderr: &lockedWriter{w: a.stderr}}
	// A hard stop waits for scripts to be killed (SIGTERM, then SIGKILL
	// after killGrace) before it releases their leases, so that no script
	// runs on after its message was handed to another worker.
	cfg.HardStopWait = killGrace + 2*time.Second
	// A reader of standard output that goes away must not kill the worker
	// with SIGPIPE while it holds leases.
	signal.Ignore(syscall.SIGPIPE)
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	wd, err := worker.NewWatchdog(worker.WatchdogConfig{Logger: a.log,
		OnStall: func([]worker.Stall) {
			stop(errStalled)
			// The hard stop releases the leases and ends the process; if it
			// cannot (the stall is in the stop's path too), the process
			// ends anyway, so that an orchestrator restarts it.
			clock.System().AfterFunc(f.shutdownTimeout+2*killGrace+10*time.Second, func() {
				a.log.Error("stalled worker did not stop; exiting")
				os.Exit(exitFailure)
			})
		}})
	if err != nil {
		return err
	}
	wd.Watch("worker", w.Heartbeat())
	loops := []lifecycle.Runnable{w, wd}
	if f.drain {
		loops = append(loops, &drainWatch{st: st, queue: cfg.Queue, log: a.log})
	}
	g, err := lifecycle.NewGroup(lifecycle.GroupConfig{ShutdownTimeout: f.shutdownTimeout}, loops...)
	if err != nil {
		return err
	}
	co := lifecycle.NewCoordinator()
	co.RepeatWindow = time.Second // a supervisor's SIGTERM to process and group
	unlisten := co.Listen()
	defer unlisten()
	co.Register(func() {
		a.log.Info("signal: shutting down gracefully; a second signal stops at once")
		go func() { _ = g.Shutdown(context.WithoutCancel(ctx)) }()
	})
	co.OnEscalate(func() {
		a.log.Warn("second signal: stopping at once")
		stop(errors.New("second signal"))
	})
	a.log.Info("worker started", "worker_id", w.ID(), "queue", cfg.Queue, "concurrency", cfg.Concurrency, "db", a.dsn.String())
	err = g.Run(runCtx)
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = errors.Join(cause, err)
	}
	return err
}

// drainWatch ends the group once the queue is empty: it returns from Run,
// which makes the group shut the worker down.
type drainWatch struct {
	st    store.Store
	queue string
	log   *slog.Logger
	state runstate.State
}

func (d *drainWatch) Run(ctx context.Context) error {
	ok, err := d.state.Begin()
	if !ok {
		return err
	}
	defer d.state.End()
	t := clock.System().NewTicker(drainPoll)
	defer t.Stop()
	for {
		s, err := d.st.Stats(ctx, d.queue)
		if err == nil && s.Pending+s.Waiting+s.Processing == 0 {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			d.log.Warn("--drain could not count the queue; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.state.Stopping():
			return nil
		case <-t.C():
		}
	}
}

func (d *drainWatch) Shutdown(ctx context.Context) error { return d.state.Shutdown(ctx) }
func (d *drainWatch) Running() bool                      { return d.state.Running() }

// scriptHandler runs a command per message.
type scriptHandler struct {
	argv           []string
	stdout, stderr io.Writer
}

func (h *scriptHandler) Handle(ctx context.Context, m *worker.Message) error {
	cmd := exec.Command(h.argv[0], h.argv[1:]...)
	// Its own process group: a terminal's Ctrl-C reaches only leasehold,
	// which decides, and stopping the script stops everything it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(),
		"LEASEHOLD_MESSAGE_ID="+strconv.FormatInt(m.MessageID, 10),
		"LEASEHOLD_QUEUE="+m.Queue,
		"LEASEHOLD_KEY="+m.Key,
		"LEASEHOLD_ATTEMPT="+strconv.Itoa(m.Attempt),
		"LEASEHOLD_FENCING_TOKEN="+strconv.FormatInt(m.FencingToken, 10),
	)
	// The pipes are the handler's own, not os/exec's, so that Wait returns
	// when the script exits even if something it started holds them open:
	// that something is killed with the group below.
	var p pipes
	defer p.closeAll()
	stdin, err := p.input(m.Payload)
	if err != nil {
		return err
	}
	cmd.Stdin = stdin
	tail := &tailBuffer{max: stderrTail}
	if cmd.Stderr, err = p.output(io.MultiWriter(h.stderr, tail)); err != nil {
		return err
	}
	reply := &limitedBuffer{max: store.DefaultPayloadLimit}
	out := h.stdout
	if m.ReplyTo != "" {
		out = reply
	}
	if cmd.Stdout, err = p.output(out); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", h.argv[0], err)
	}
	p.started()
	group := cmd.Process.Pid
	// Stopped (lease lost, max processing time, shutdown): SIGTERM to the
	// group, SIGKILL after killGrace, unless the script has exited by then.
	var (
		mu     sync.Mutex
		exited bool
		kill   clock.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !exited {
			_ = syscall.Kill(-group, syscall.SIGTERM)
			kill = clock.System().AfterFunc(killGrace, func() { _ = syscall.Kill(-group, syscall.SIGKILL) })
		}
	})
	err = cmd.Wait()
	stop()
	mu.Lock()
	exited = true
	if kill != nil {
		kill.Stop()
	}
	mu.Unlock()
	// Nothing the script started outlives its message.
	_ = syscall.Kill(-group, syscall.SIGKILL)
	p.wait()
	if ctx.Err() != nil {
		return fmt.Errorf("%s stopped: %w", h.argv[0], context.Cause(ctx))
	}
	if err == nil {
		if m.ReplyTo != "" {
			if reply.over {
				return worker.Permanent(fmt.Errorf("%s: reply is larger than the payload limit of %d bytes", h.argv[0], store.DefaultPayloadLimit))
			}
			m.SetReply(reply.Bytes())
		}
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("run %s: %w", h.argv[0], err)
	}
	failure := fmt.Errorf("%s: %s", h.argv[0], exit)
	if t := bytes.TrimSpace(tail.Bytes()); len(t) > 0 {
		failure = fmt.Errorf("%w: %s", failure, t)
	}
	if exit.ExitCode() == exitDataErr {
		return worker.Permanent(failure)
	}
	return failure
}

// pipes are a script's standard streams: the ends the script gets, closed
// in this process once it has started, and goroutines that feed and drain
// the other ends.
type pipes struct {
	child []*os.File // the script's ends
	own   []*os.File // this process's ends
	wg    sync.WaitGroup
	work  []func()
}

// input returns a pipe the script reads payload from.
func (p *pipes) input(payload []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.child, p.own = append(p.child, r), append(p.own, w)
	p.work = append(p.work, func() {
		_, _ = w.Write(payload) // a script need not read its input
		_ = w.Close()
	})
	return r, nil
}

// output returns a pipe whose contents are copied to dst.
func (p *pipes) output(dst io.Writer) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.child, p.own = append(p.child, w), append(p.own, r)
	p.work = append(p.work, func() { _, _ = io.Copy(dst, r) })
	return w, nil
}

// started closes the script's ends here and starts the copying.
func (p *pipes) started() {
	for _, f := range p.child {
		_ = f.Close()
	}
	p.child = nil
	for _, f := range p.work {
		p.wg.Go(f)
	}
}

// wait waits for the copying to end: when every holder of the script's
// ends has exited.
func (p *pipes) wait() { p.wg.Wait() }

func (p *pipes) closeAll() {
	for _, f := range p.child {
		_ = f.Close()
	}
	for _, f := range p.own {
		_ = f.Close()
	}
}

// limitedBuffer keeps up to max bytes and notes whether more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p) // everything is taken, so that the script never blocks
	if room := b.max - b.Len(); n > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	_, _ = b.Buffer.Write(p)
	return n, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf }

// lockedWriter serialises writes from concurrent scripts to the worker's
// own output. Write errors are swallowed: a reader of that output that goes
// away must not fail the scripts' messages.
type lockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.broken {
		if _, err := l.w.Write(p); err != nil {
			l.broken = true
		}
	}
	return len(p), nil
}
