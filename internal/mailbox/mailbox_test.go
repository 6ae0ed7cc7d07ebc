package mailbox_test

import (
	"context"
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
				"Receive": testReceive, "StopEndsTheWait": testStopEndsTheWait, "LongPollWakesOnEnqueue": testLongPollWakesOnEnqueue,
				"LongPollTimesOut": testLongPollTimesOut,
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

// pollEmpty long-polls the empty queue for 20 s of clock time, or until
// stop is closed, and returns once the receiver waits; the channel gets
// the receive's error, or one that says it returned messages.
func (b *bundle) pollEmpty(t *testing.T, stop <-chan struct{}) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ms, err := b.mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 1, Visibility: lease, Wait: 20 * time.Second, Stop: stop})
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
	return done
}

func testLongPollTimesOut(t *testing.T, f factory) {
	b := setup(t, f)
	done := b.pollEmpty(t, nil)
	b.clk.Advance(20 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Closing Stop ends a long poll at once, with no messages and no error.
func testStopEndsTheWait(t *testing.T, f factory) {
	b := setup(t, f)
	stop := make(chan struct{})
	done := b.pollEmpty(t, stop)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.clk.Monotonic() != 0 {
		t.Fatalf("the wait took %s of clock time; Stop should end it at once", b.clk.Monotonic())
	}
}

// A receive takes at most Max messages, under a lease whose deadline, by
// the receiver's reckoning, is the claim's moment plus the visibility; a
// message it holds is not received again until the store gives it back.
func testReceive(t *testing.T, f factory) {
	b := setup(t, f)
	mb := b.mb
	res, err := b.s.Enqueue(b.ctx, []store.NewMessage{{Queue: "q", Payload: []byte("hi"), Key: "k"}, {Queue: "q", Payload: []byte("there")}})
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	ms, err := mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 1, Visibility: 10 * time.Second})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %d, %v", len(ms), err)
	}
	m := ms[0]
	if m.MessageID != res[0].ID || string(m.Payload) != "hi" || m.Key != "k" || m.Attempt != 1 {
		t.Fatalf("message %+v", m.Delivery)
	}
	if want := b.clk.Monotonic() + 10*time.Second; m.LeaseDeadline() != want {
		t.Fatalf("lease deadline %s, want %s", m.LeaseDeadline(), want)
	}
	ms, err = mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 5, Visibility: lease})
	if err != nil || len(ms) != 1 || ms[0].MessageID != res[1].ID {
		t.Fatalf("second Receive = %d, %v; want the other message only", len(ms), err)
	}
	if ms, err := mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 5, Visibility: lease}); err != nil || len(ms) != 0 {
		t.Fatalf("Receive with both held = %d, %v; want none", len(ms), err)
	}
	if err := b.s.Release(b.ctx, store.Release{Lease: m.Lease}); err != nil {
		t.Fatal(err)
	}
	ms, err = mb.Receive(b.ctx, mailbox.ReceiveOptions{Max: 5, Visibility: lease})
	if err != nil || len(ms) != 1 || ms[0].MessageID != m.MessageID || ms[0].Attempt != 2 {
		t.Fatalf("after the release: %d, %v; want the first message again, at attempt 2", len(ms), err)
	}
}
