package mailbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/internal/mailbox"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
	"github.com/leasehold/leasehold/store/postgres"
	"github.com/leasehold/leasehold/store/sqlite"
)

// factory returns a new, empty store whose time authority is clk, closed
// when the test ends.
type factory func(t *testing.T, clk clock.Clock) store.Store

const lease = 30 * time.Second

type bundle struct {
	ctx context.Context
	clk *clocktest.Clock
	s   store.Store
	mb  *mailbox.Mailbox
}

func setup(t *testing.T, f factory) *bundle {
	t.Helper()
	clk := clocktest.New()
	s := f(t, clk)
	mb := mailbox.New(mailbox.Config{Store: s, Queue: "q", WorkerID: "mb", Clock: clk, PollInterval: time.Hour})
	return &bundle{ctx: context.Background(), clk: clk, s: s, mb: mb}
}

// The mailbox's verbs and long polls on each backend: its rules are its
// own, but it leans on each store's leases and wake-ups.
func TestOnEveryBackend(t *testing.T) {
	backends := map[string]factory{
		"memory": func(t *testing.T, clk clock.Clock) store.Store {
			s, err := memory.New(memory.Config{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"sqlite": func(t *testing.T, clk clock.Clock) store.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "mb.db"), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(t *testing.T, clk clock.Clock) store.Store {
			pool := pgtest.Pool(t)
			s, err := postgres.Open(context.Background(), postgres.Config{Pool: pool, Schema: pgtest.Schema(t, pool), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for name, f := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for test, fn := range map[string]func(*testing.T, factory){
				"Verbs": testVerbs, "LongPollWakesOnEnqueue": testLongPollWakesOnEnqueue, "LongPollTimesOut": testLongPollTimesOut,
			} {
				t.Run(test, func(t *testing.T) { fn(t, f) })
			}
		})
	}
}

func testLongPollWakesOnEnqueue(t *testing.T, f factory) {
	b := setup(t, f)
	got := make(chan []*mailbox.Message, 1)
	errc := make(chan error, 1)
	go func() {
		ms, err := b.mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 10, Visibility: lease, Wait: 20 * time.Second})
		got <- ms
		errc <- err
	}()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := b.clk.BlockUntil(ctx, 1); err != nil { // the receiver is waiting
		t.Fatal(err)
	}
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: "q", Payload: []byte("wake up")}})
	if err != nil {
		t.Fatal(err)
	}
	ms := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].MessageID != res[0].ID {
		t.Fatalf("long poll returned %d messages", len(ms))
	}
	if b.clk.Monotonic() != 0 {
		t.Fatalf("long poll needed %s of clock time; the enqueue should wake it at once", b.clk.Monotonic())
	}
}

func testLongPollTimesOut(t *testing.T, f factory) {
	b := setup(t, f)
	done := make(chan error, 1)
	go func() {
		ms, err := b.mb.Receive(b.ctx, mailbox.ReceiveOptions{Visibility: lease, Wait: 20 * time.Second})
		if err == nil && len(ms) != 0 {
			err = fmt.Errorf("got %d messages from an empty queue", len(ms))
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := b.clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(20 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func testVerbs(t *testing.T, f factory) {
	b := setup(t, f)
	mb := b.mb
	res, err := mb.Send(b.ctx, []byte("hi"), mailbox.SendOptions{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 5, Visibility: 10 * time.Second})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %d, %v", len(ms), err)
	}
	m := ms[0]
	if m.MessageID != res.ID || string(m.Body()) != "hi" || m.Key != "k" || m.Attempt != 1 {
		t.Fatalf("message %+v", m.Delivery)
	}
	l, err := mailbox.ParseReceiptHandle(m.ReceiptHandle())
	if err != nil || l != m.Lease {
		t.Fatalf("receipt handle round trip = %v, %v", l, err)
	}
	b.clk.Advance(9 * time.Second)
	if err := m.ExtendVisibility(b.ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(9 * time.Second)
	if err := m.Nack(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Ack(b.ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Ack after Nack = %v, want ErrLeaseLost", err)
	}
	if err := m.ExtendVisibility(b.ctx, time.Second); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ExtendVisibility after Nack = %v, want ErrLeaseLost", err)
	}
	ms, _ = mb.Receive(b.ctx, mailbox.ReceiveOptions{Visibility: lease})
	if len(ms) != 1 || ms[0].Attempt != 2 {
		t.Fatalf("redelivery = %d messages", len(ms))
	}
	if err := ms[0].Unreceive(b.ctx); err != nil {
		t.Fatal(err)
	}
	ms, _ = mb.Receive(b.ctx, mailbox.ReceiveOptions{Visibility: lease})
	if len(ms) != 1 || ms[0].Attempt != 2 {
		t.Fatalf("after Unreceive: %d messages, want the message again at attempt 2", len(ms))
	}
	if dead, err := ms[0].Fail(b.ctx, errors.New("nope"), 0, true); err != nil || !dead {
		t.Fatalf("Fail = %v, %v", dead, err)
	}
	if _, err := mailbox.ParseReceiptHandle("garbage"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ParseReceiptHandle(garbage) = %v", err)
	}
}
