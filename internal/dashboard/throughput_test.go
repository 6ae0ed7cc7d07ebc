package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/memory"
)

// countingStore counts the queues counted one at a time.
type countingStore struct {
	store.Store
	stats atomic.Int64
}

func (s *countingStore) Stats(ctx context.Context, queue string) (store.Stats, error) {
	s.stats.Add(1)
	return s.Store.Stats(ctx, queue)
}

// A sample counts every queue in one store call, and an idle queue keeps
// no samples, only its last count: its chart is flat at zero. A queue
// whose count moves keeps its window until it has been idle for a whole
// window.
func TestSamplesKeepActiveQueuesOnly(t *testing.T) {
	clk := clocktest.New()
	mem, err := memory.New(memory.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	st := &countingStore{Store: mem}
	ctx := context.Background()
	const idle = 500
	msgs := make([]store.NewMessage, idle)
	for i := range msgs {
		msgs[i] = store.NewMessage{Queue: fmt.Sprintf("idle%03d", i)}
	}
	if _, err := st.Enqueue(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), Key: make([]byte, MinKey)})
	if err != nil {
		t.Fatal(err)
	}
	complete := func(n int) {
		busy := make([]store.NewMessage, n)
		for i := range busy {
			busy[i] = store.NewMessage{Queue: "busy"}
		}
		if _, err := st.Enqueue(ctx, busy); err != nil {
			t.Fatal(err)
		}
		ds, err := st.Claim(ctx, store.Claim{Queue: "busy", WorkerID: "w", Max: n, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cs := make([]store.Completion, len(ds))
		for i, d := range ds {
			cs[i] = store.Completion{Lease: d.Lease}
		}
		if _, err := st.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	step := func() {
		clk.Advance(DefaultSampleInterval)
		d.sample(ctx)
	}
	complete(1)
	for range 3 {
		step()
	}
	complete(10)
	step()
	if n := st.stats.Load(); n != 0 {
		t.Fatalf("the samples counted queues one at a time %d times", n)
	}
	if got := d.rates("busy"); len(got) != 3 || got[0] != 0 || got[1] != 0 || got[2] != 2 {
		t.Fatalf("busy's rates = %v, want [0 0 2]", got)
	}
	if got := d.rates("idle007"); len(got) != 3 || got[0] != 0 || got[2] != 0 {
		t.Fatalf("an idle queue's rates = %v, want three zeros", got)
	}
	kept := 0
	for _, s := range d.history {
		kept += len(s.at)
	}
	if kept != 2 {
		t.Fatalf("the history keeps %d samples, want busy's 2", kept)
	}
	for range samples {
		step()
	}
	if s := d.history["busy"]; s.at != nil {
		t.Fatalf("busy keeps %d samples after a whole idle window", len(s.at))
	}
	if got := d.rates("busy"); len(got) != samples || got[samples-1] != 0 {
		t.Fatalf("busy's rates after an idle window = %v", got)
	}
	if len(d.history) != idle+1 {
		t.Fatalf("%d queues sampled, want %d", len(d.history), idle+1)
	}
}
