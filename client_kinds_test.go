package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/store"
)

// A job of a kind that no handler of the client knows is refused, and
// nothing enqueued, when it would go to a queue the client works, with
// Enqueue and EnqueueTx alike; on another queue, from a client that works
// no queues, on a client with a raw handler for every kind, or with
// RejectUnknownKinds false, it goes through.
func TestEnqueueOfAnUnknownKind(t *testing.T) {
	onEachBackend(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		newClient := func(queues map[string]leasehold.QueueConfig) *leasehold.Client[store.NoTx] {
			return clientOf(t, st, leasehold.Config{Queues: queues})
		}
		worker := newClient(map[string]leasehold.QueueConfig{"default": {}})
		leasehold.AddHandler(worker, func(context.Context, *leasehold.Job[sendEmail]) error { return nil })
		enqueues := map[string]func(*leasehold.Client[store.NoTx], *leasehold.EnqueueOptions) error{
			"Enqueue": func(c *leasehold.Client[store.NoTx], o *leasehold.EnqueueOptions) error {
				_, err := c.Enqueue(ctx, unhandled{}, o)
				return err
			},
			"EnqueueTx": func(c *leasehold.Client[store.NoTx], o *leasehold.EnqueueOptions) error {
				_, err := c.EnqueueTx(ctx, store.NoTx{}, unhandled{}, o)
				return err
			},
		}
		for name, enqueue := range enqueues {
			err := enqueue(worker, nil)
			var unknown *leasehold.UnknownKindError
			if !errors.As(err, &unknown) || unknown.Kind != "nobody_handles_this" || !strings.Contains(err.Error(), `queue "default", which this client works`) {
				t.Fatalf("%s of a kind without a handler on a queue the client works: %v, want an *UnknownKindError naming both", name, err)
			}
			if err := enqueue(worker, &leasehold.EnqueueOptions{Queue: "elsewhere"}); err != nil {
				t.Fatalf("%s on a queue the client does not work: %v", name, err)
			}
			if err := enqueue(newClient(nil), nil); err != nil {
				t.Fatalf("%s from a client that works no queues: %v", name, err)
			}
			raw := newClient(map[string]leasehold.QueueConfig{"default": {}})
			raw.HandleAny(func(context.Context, *leasehold.RawJob) error { return nil })
			if err := enqueue(raw, nil); err != nil {
				t.Fatalf("%s from a client with a raw handler: %v", name, err)
			}
			lenient := clientOf(t, st, leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {}}, RejectUnknownKinds: new(false)})
			if err := enqueue(lenient, nil); err != nil {
				t.Fatalf("%s from a client with RejectUnknownKinds false: %v", name, err)
			}
		}
		if _, err := worker.Enqueue(ctx, sendEmail{To: "ann"}, nil); err != nil {
			t.Fatalf("a kind the client knows: %v", err)
		}
		if d, e := count(t, st, "default"), count(t, st, "elsewhere"); d.Pending != 7 || e.Pending != 2 {
			t.Fatalf("default %+v, elsewhere %+v; want 7 and 2 jobs, none of the refused ones", d, e)
		}
	})
}
