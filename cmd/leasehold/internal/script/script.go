package script

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/worker"
)

const (
	// exitDataErr (EX_DATAERR) from a script dead-letters its message at
	// once.
	exitDataErr = 65
	// KillGrace is how long a script has between SIGTERM and SIGKILL.
	KillGrace = 5 * time.Second
	// supervisorGrace is how long the supervisor has, once told to kill a
	// script, before it is killed itself.
	supervisorGrace = time.Second
	// StopTime bounds how long a script that was told to stop takes to be
	// gone, everything it started with it.
	StopTime = KillGrace + supervisorGrace
	// pipeGrace is how long a script's output may stay open after the
	// script exited, held by something it started, before it is closed.
	pipeGrace = 2 * time.Second
	// stderrTail is how much of a failed script's stderr is recorded.
	stderrTail = 2048
	// maxLine is the longest line of a script's output passed through in
	// one piece; a longer one is split, and the split is logged.
	maxLine = 64 << 10
	// MaxStartFailures is how many starts in a row may fail before the
	// worker concludes that the command cannot run and stops.
	MaxStartFailures = 3
)

// Handler runs a command per message, forked by the worker's supervisor
// (see Supervise): the payload on standard input, the message's facts in
// the environment.
// Exit 0 completes the message, exit 65 (EX_DATAERR) dead-letters it at
// once, any other status fails it with the tail of standard error; a
// command that cannot start gives the message back without counting it.
type Handler struct {
	// Argv is the command and its arguments; Argv[0] is a path.
	Argv []string
	// Stdout and Stderr take every script's output, a whole line per
	// Write: give them a LockedWriter when they are shared.
	Stdout, Stderr io.Writer
	Log            *slog.Logger
	// Broken is called once, when MaxStartFailures starts in a row failed.
	Broken func(error)
	// User, when set, is the account scripts run as (see LookupUser); else
	// they run as the worker's.
	User       *User
	failedRuns atomic.Int32
	brokenOnce sync.Once
	// mu guards the supervisor, started at the first message and again
	// after one ended.
	mu     sync.Mutex
	sup    *supervisorConn
	closed bool
}

// workerEnv is the environment of every script but for its message's
// variables: the worker's own, without leasehold's settings (the
// database's address may hold a password) or PGPASSWORD.
func workerEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "LEASEHOLD_") || name == "PGPASSWORD" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// messageVars are the variables that tell a script of its message.
func messageVars(job *leasehold.RawJob) []string {
	return []string{
		"LEASEHOLD_MESSAGE_ID=" + strconv.FormatInt(job.ID, 10),
		"LEASEHOLD_QUEUE=" + job.Queue,
		"LEASEHOLD_KEY=" + job.Key,
		"LEASEHOLD_ATTEMPT=" + strconv.Itoa(job.Attempt),
		"LEASEHOLD_FENCING_TOKEN=" + strconv.FormatInt(job.FencingToken, 10),
	}
}

// supervisor returns the worker's supervisor, started now if there is
// none or the last one ended.
func (h *Handler) supervisor() (*supervisorConn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errSupervisorGone
	}
	if h.sup == nil || !h.sup.alive() {
		sup, err := startSupervisor(h.Argv, h.User, h.User.env(workerEnv(os.Environ())))
		if err != nil {
			return nil, fmt.Errorf("start the supervising process: %w", err)
		}
		h.sup = sup
	}
	return h.sup, nil
}

// Close ends the supervisor, which kills what is left of the scripts, and
// waits for it. No script starts after it.
func (h *Handler) Close() {
	h.mu.Lock()
	sup := h.sup
	h.closed, h.sup = true, nil
	h.mu.Unlock()
	if sup != nil {
		sup.close()
	}
}

// Handle runs the command for job: the client's raw handler
// (leasehold.Client.HandleAny).
func (h *Handler) Handle(ctx context.Context, job *leasehold.RawJob) error {
	name := h.Argv[0]
	var p pipes
	defer p.closeAll()
	stdin, err := p.input(job.Payload)
	if err != nil {
		return worker.NotStarted(err)
	}
	tail := &tailBuffer{max: stderrTail}
	errLines := &lineWriter{w: h.Stderr}
	stderr, err := p.output(io.MultiWriter(errLines, tail))
	if err != nil {
		return worker.NotStarted(err)
	}
	var reply *limitedBuffer
	outLines := &lineWriter{w: h.Stdout}
	var out io.Writer = outLines
	if job.ReplyTo != "" {
		reply = &limitedBuffer{max: worker.MaxReplyOutput}
		out = reply
	}
	stdout, err := p.output(out)
	if err != nil {
		return worker.NotStarted(err)
	}
	sup, err := h.supervisor()
	if err != nil {
		return h.startFailed(fmt.Errorf("start %s: %w", name, err))
	}
	id, ch, err := sup.start(messageVars(job), [3]*os.File{stdin, stdout, stderr})
	if errors.Is(err, errVarsTooLong) {
		return leasehold.Permanent(fmt.Errorf("start %s: %w", name, err))
	}
	if err != nil {
		// The supervisor ended before the request reached it (a script
		// killed it, say): not the command's fault, and not counted; the
		// next message gets a new supervisor.
		return worker.NotStarted(fmt.Errorf("start %s: %w", name, err))
	}
	p.started()
	// Stopped (lease lost, max processing time, shutdown): SIGTERM to the
	// script, and everything it started is killed KillGrace later unless
	// the script has exited by then. A supervisor that has not reported
	// supervisorGrace after that (a script stopped it with SIGSTOP, say)
	// is killed, with every script it runs, and their orphans come to this
	// process.
	var (
		mu     sync.Mutex
		exited bool
		kill   clock.Timer
	)
	later := func(f func()) {
		mu.Lock()
		defer mu.Unlock()
		if !exited {
			f()
		}
	}
	stop := context.AfterFunc(ctx, func() {
		later(func() {
			sup.signal("term", id)
			kill = clock.System().AfterFunc(KillGrace, func() {
				sup.signal("kill", id)
				later(func() { kill = clock.System().AfterFunc(supervisorGrace, sup.kill) })
			})
		})
	})
	end := <-ch
	stop()
	mu.Lock()
	exited = true
	if kill != nil {
		kill.Stop()
	}
	mu.Unlock()
	p.drain(pipeGrace)
	for _, lw := range []*lineWriter{outLines, errLines} {
		lw.flush()
		if lw.split {
			h.Log.Warn("a line of the script's output was longer than the limit and was split", "message_id", job.ID,
				"limit_bytes", maxLine)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s stopped: %w", name, context.Cause(ctx))
	}
	switch {
	case !end.ok && end.killed:
		// This process killed the supervisor, as another script's run did
		// not end after it was stopped: this script died with the
		// supervisor through no fault of its own, and its delivery is not
		// counted.
		return worker.NotStarted(fmt.Errorf("run %s: stopped when the supervising process was killed, as another script did not end after its stop; the %d processes the scripts left were killed", name, end.orphans))
	case !end.ok:
		// A supervisor that did not report was killed, by a script perhaps:
		// what its scripts started was this process's, and was killed.
		return fmt.Errorf("run %s: the supervising process ended without a report (%v); the %d processes its scripts left were killed", name, end.waitErr, end.orphans)
	case end.ended.startErr != "":
		return h.startFailed(fmt.Errorf("start %s: %s", name, end.ended.startErr))
	}
	ended := end.ended
	h.failedRuns.Store(0)
	if ended.status.Exited() && ended.status.ExitStatus() == 0 {
		if reply != nil {
			if reply.over {
				return leasehold.Permanent(fmt.Errorf("%s: reply over %d bytes", name, worker.MaxReplyOutput))
			}
			job.SetReply(reply.buf)
		}
		return nil
	}
	failure := fmt.Errorf("%s: %s", name, ended)
	if t := bytes.TrimSpace(tail.Bytes()); len(t) > 0 {
		failure = fmt.Errorf("%w: %s", failure, t)
	}
	if ended.status.Exited() && ended.status.ExitStatus() == exitDataErr {
		return leasehold.Permanent(failure)
	}
	return failure
}

// startFailed counts a start that failed, stops the worker when too many
// failed in a row, and returns err marked as not started: the message goes
// back without using up a delivery.
func (h *Handler) startFailed(err error) error {
	if h.failedRuns.Add(1) >= MaxStartFailures && h.Broken != nil {
		h.brokenOnce.Do(func() { h.Broken(err) })
	}
	return worker.NotStarted(err)
}

// pipes are a script's standard streams: the ends the supervisor gets,
// closed in this process once they were sent, and goroutines that feed
// and drain the other ends.
type pipes struct {
	child []*os.File // the supervisor's ends
	own   []*os.File // this process's ends
	wg    sync.WaitGroup
	work  []func()
}

// pipe returns a new pipe; the supervisor gets its write end when
// childWrites, else its read end.
func (p *pipes) pipe(childWrites bool) (r, w *os.File, err error) {
	if r, w, err = os.Pipe(); err != nil {
		return nil, nil, err
	}
	if childWrites {
		p.child, p.own = append(p.child, w), append(p.own, r)
	} else {
		p.child, p.own = append(p.child, r), append(p.own, w)
	}
	return r, w, nil
}

// input returns a pipe the script reads payload from.
func (p *pipes) input(payload []byte) (*os.File, error) {
	r, w, err := p.pipe(false)
	if err != nil {
		return nil, err
	}
	p.work = append(p.work, func() {
		_, _ = w.Write(payload) // a script need not read its input
		_ = w.Close()
	})
	return r, nil
}

// output returns a pipe whose contents are copied to dst.
func (p *pipes) output(dst io.Writer) (*os.File, error) {
	r, w, err := p.pipe(true)
	if err != nil {
		return nil, err
	}
	p.work = append(p.work, func() { copyOut(dst, r) })
	return w, nil
}

// copyBuffers are the buffers of copyOut, shared by every script's copies:
// a buffer of its own for each of them, which io.Copy would allocate, was
// most of what a worker allocated per message.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyOut copies what r gives to dst until r ends, through a pooled
// buffer. The wrapper hides r's WriteTo, which would bring its own.
func copyOut(dst io.Writer, r *os.File) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	_, _ = io.CopyBuffer(dst, struct{ io.Reader }{r}, *buf)
}

// started closes the supervisor's ends here, once they were sent, and
// starts the copying.
func (p *pipes) started() {
	for _, f := range p.child {
		_ = f.Close()
	}
	p.child = nil
	for _, f := range p.work {
		p.wg.Go(f)
	}
}

// drain waits for the copying to end, which it does when every holder of
// the script's ends has exited, but at most grace: then this process's
// ends are closed, which ends it.
func (p *pipes) drain(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	t := clock.System().NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
		p.closeAll()
		<-done
	}
}

func (p *pipes) closeAll() {
	for _, f := range p.child {
		_ = f.Close()
	}
	for _, f := range p.own {
		_ = f.Close()
	}
}

// limitedBuffer keeps up to max bytes and notes whether more came. It has
// only Write, so that every copy into it goes through the limit.
type limitedBuffer struct {
	buf  []byte
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p) // everything is taken, so that the script never blocks
	if room := b.max - len(b.buf); n > room {
		b.over = true
		p = p[:max(room, 0)]
	}
	b.buf = append(b.buf, p...)
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

// lineWriter passes one script's output to a writer shared with other
// scripts in whole lines, so that lines of concurrent scripts never mix. A
// line longer than maxLine is passed on in pieces of maxLine bytes, each
// ended with a newline, and split is set.
type lineWriter struct {
	w     io.Writer
	buf   []byte
	split bool
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		_, _ = l.w.Write(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	for len(l.buf) >= maxLine {
		l.split = true
		_, _ = l.w.Write(append(l.buf[:maxLine:maxLine], '\n'))
		l.buf = append(l.buf[:0], l.buf[maxLine:]...)
	}
	return len(p), nil
}

// flush passes on an unfinished last line, with a newline.
func (l *lineWriter) flush() {
	if len(l.buf) > 0 {
		_, _ = l.w.Write(append(l.buf, '\n'))
		l.buf = nil
	}
}

// LockedWriter serialises writes from concurrent scripts to the worker's
// own output. Write errors are swallowed: a reader of that output that goes
// away must not fail the scripts' messages.
type LockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	broken bool
}

// NewLockedWriter returns a LockedWriter around w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.broken {
		if _, err := l.w.Write(p); err != nil {
			l.broken = true
		}
	}
	return len(p), nil
}
