package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/store"
)

func testBadInputChangesNothing(t *testing.T, f Factory) {
	b := setup(t, f)
	b.send("x")
	d := b.claimOne()
	before := b.stats()
	ctx := b.ctx
	s := b.s
	long := strings.Repeat("q", store.MaxNameLength+1)
	big := make([]byte, store.DefaultPayloadLimit+1)
	cases := map[string]func() error{
		"empty queue":            func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Payload: []byte("x")}}); return err },
		"over-long queue":        func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: long}}); return err },
		"payload over the limit": func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Payload: big}}); return err },
		"negative delay": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Delay: -time.Second}})
			return err
		},
		"negative max deliveries": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, MaxDeliveries: -1}})
			return err
		},
		"over-long key": func() error { _, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, Key: long}}); return err },
		"no messages":   func() error { _, err := s.Enqueue(ctx, nil); return err },
		"claim of zero": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 0, LeaseDuration: lease})
			return err
		},
		"claim bad queue": func() error { _, err := s.Claim(ctx, store.Claim{Queue: "", Max: 1, LeaseDuration: lease}); return err },
		"zero lease":      func() error { _, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1}); return err },
		"negative lease": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1, LeaseDuration: -time.Second})
			return err
		},
		"lease under 1ms": func() error {
			_, err := s.Claim(ctx, store.Claim{Queue: b.queue, Max: 1, LeaseDuration: 999 * time.Microsecond})
			return err
		},
		"zero extension":       func() error { _, err := s.Extend(ctx, []store.Lease{d.Lease}, 0); return err },
		"negative retry delay": func() error { _, err := s.Fail(ctx, store.Failure{Lease: d.Lease, RetryDelay: -1}); return err },
		"negative release delay": func() error {
			return s.Release(ctx, store.Release{Lease: d.Lease, Delay: -time.Second})
		},
		"negative retention": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Completed, OlderThan: -time.Second, Limit: 10})
			return err
		},
		"zero prune batch": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Completed, OlderThan: time.Second})
			return err
		},
		"prune pending": func() error {
			_, err := s.Prune(ctx, store.Prune{State: store.Pending, Limit: 10})
			return err
		},
		"stats bad queue": func() error { _, err := s.Stats(ctx, ""); return err },
		"list bad limit":  func() error { _, err := s.List(ctx, store.ListFilter{Queue: b.queue, Limit: -1}); return err },
		"list bad state":  func() error { _, err := s.List(ctx, store.ListFilter{Queue: b.queue, State: 9}); return err },
		"max deliveries over the limit": func() error {
			_, err := s.Enqueue(ctx, []store.NewMessage{{Queue: b.queue, MaxDeliveries: store.MaxDeliveriesLimit + 1}})
			return err
		},
	}
	for name, call := range cases {
		if err := call(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	// An unknown lease is not bad input but a lost lease.
	unknown := store.Lease{MessageID: 424242, FencingToken: 7}
	wantLost(t, "Complete(unknown)", b.complete(unknown))
	wantLost(t, "Release(unknown)", s.Release(ctx, store.Release{Lease: unknown}))
	if after := b.stats(); after != before {
		t.Fatalf("bad input changed the queue: %+v -> %+v", before, after)
	}
	b.mustComplete(d.Lease)
}

func testPingAndClose(t *testing.T, f Factory) {
	b := setup(t, f)
	if err := b.s.Ping(b.ctx); err != nil {
		t.Fatalf("Ping on an open store: %v", err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Ping(b.ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want ErrClosed", err)
	}
	if _, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "w", Max: 1, LeaseDuration: lease}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Claim after Close = %v, want ErrClosed", err)
	}
}
