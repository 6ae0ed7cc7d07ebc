package sqsapi

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/store"
)

// coalescer makes one store call of many requests' items: a request that
// finds a call in flight waits, and the next call takes every request
// waiting by then. The store's cost is mostly per call, so under load
// requests share calls, and alone each makes its own at once.
type coalescer[In, Out any] struct {
	// run makes the store call: one result per item, in order, or one
	// error for all.
	run func(ctx context.Context, items []In) ([]Out, error)

	mu      sync.Mutex
	cond    *sync.Cond
	busy    bool
	waiting []*joined[In, Out]
}

// joined is one request's part of a call.
type joined[In, Out any] struct {
	items []In
	out   []Out
	err   error
	done  bool
}

func newCoalescer[In, Out any](run func(context.Context, []In) ([]Out, error)) *coalescer[In, Out] {
	c := &coalescer[In, Out]{run: run}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// do runs items in a call, alone or with other requests' items, and
// returns their results. The call outlives ctx, so that a request that
// gives up does not fail the others sharing its call.
func (c *coalescer[In, Out]) do(ctx context.Context, items []In) ([]Out, error) {
	j := &joined[In, Out]{items: items}
	c.mu.Lock()
	c.waiting = append(c.waiting, j)
	for c.busy && !j.done {
		c.cond.Wait()
	}
	if j.done {
		c.mu.Unlock()
		return j.out, j.err
	}
	// No call is in flight: this request makes the next one, for every
	// request waiting, itself among them.
	batch := c.waiting
	c.waiting = nil
	c.busy = true
	c.mu.Unlock()

	var all []In
	for _, b := range batch {
		all = append(all, b.items...)
	}
	out, err := c.run(context.WithoutCancel(ctx), all)

	c.mu.Lock()
	for _, b := range batch {
		b.err = err
		if err == nil {
			b.out, out = out[:len(b.items):len(b.items)], out[len(b.items):]
		}
		b.done = true
	}
	c.busy = false
	c.cond.Broadcast()
	c.mu.Unlock()
	return j.out, j.err
}

// claimKey names the claims that can share a store call: those of one
// queue under the same lease.
type claimKey struct {
	queue string
	lease time.Duration
}

// sharedClaims is the store as receives see it: its Claim shares store
// calls among concurrent receives of one queue and lease. A shared call
// claims what they ask for together, and the messages go to the
// receives in the order they joined, each getting at most its Max.
type sharedClaims struct {
	store.Store
	mu     sync.Mutex
	claims map[claimKey]*coalescer[struct{}, *store.Delivery]
}

func (s *sharedClaims) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	if c.Max < 1 || c.Max > store.MaxBatch {
		return s.Store.Claim(ctx, c) // the store names the problem
	}
	k := claimKey{c.Queue, c.LeaseDuration}
	s.mu.Lock()
	co := s.claims[k]
	if co == nil {
		co = newCoalescer(func(ctx context.Context, slots []struct{}) ([]*store.Delivery, error) {
			shared := c
			shared.Max = min(len(slots), store.MaxBatch)
			ds, err := s.Store.Claim(ctx, shared)
			if err != nil {
				return nil, err
			}
			out := make([]*store.Delivery, len(slots))
			for i := range ds {
				out[i] = &ds[i]
			}
			return out, nil
		})
		s.claims[k] = co
	}
	s.mu.Unlock()
	got, err := co.do(ctx, make([]struct{}, c.Max))
	if err != nil {
		return nil, err
	}
	var out []store.Delivery
	for _, d := range got {
		if d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}
