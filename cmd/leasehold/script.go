package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/worker"
)

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
