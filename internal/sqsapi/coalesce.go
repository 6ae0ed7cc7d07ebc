package sqsapi

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// callTimeout bounds one shared store call: a database that hangs fails
// the requests in it instead of holding them, and everyone behind them,
// for ever.
const callTimeout = 30 * time.Second

// coalescer makes one store call of many requests' items: a request that
// finds a call in flight waits, and the next call takes the requests
// waiting by then, up to store.MaxBatch items. The store's cost is mostly
// per call, so under load requests share calls, and alone each makes its
// own at once.
type coalescer[In, Out any] struct {
	// run makes the store call: one result per item, in order, or one
	// error for all.
	run func(ctx context.Context, items []In) ([]Out, error)
	clk clock.Clock

	mu      sync.Mutex
	busy    bool
	waiting []*joined[In, Out]
}

// joined is one request's part of a call.
type joined[In, Out any] struct {
	items []In
	out   []Out
	err   error
	// done is closed once out and err are set; lead, when this request
	// is to make the next call for everyone waiting.
	done, lead chan struct{}
}

func newCoalescer[In, Out any](clk clock.Clock, run func(context.Context, []In) ([]Out, error)) *coalescer[In, Out] {
	return &coalescer[In, Out]{run: run, clk: clk}
}

// do runs items in a call, alone or with other requests' items, and
// returns their results. A request that gives up (ctx ends) before a call
// takes it leaves; once taken, its items are in the call, which is bounded
// by callTimeout and not by ctx, so that one request that gives up does
// not fail the others sharing its call.
func (c *coalescer[In, Out]) do(ctx context.Context, items []In) ([]Out, error) {
	j := &joined[In, Out]{items: items, done: make(chan struct{}), lead: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, j)
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		c.lead(ctx)
	} else {
		c.mu.Unlock()
		select {
		case <-j.done:
		case <-j.lead:
			c.lead(ctx)
		case <-ctx.Done():
			if c.leave(j) {
				return nil, ctx.Err()
			}
			// Taken already, or chosen to lead: see it through.
			select {
			case <-j.done:
			case <-j.lead:
				c.lead(ctx)
			}
		}
	}
	<-j.done
	return j.out, j.err
}

// leave takes j out of the waiting requests, unless a call has taken it
// or it was chosen to lead; it reports whether it did.
func (c *coalescer[In, Out]) leave(j *joined[In, Out]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-j.lead:
		return false
	default:
	}
	i := slices.Index(c.waiting, j)
	if i < 0 {
		return false
	}
	c.waiting = slices.Delete(c.waiting, i, i+1)
	return true
}

// lead makes one call for the requests waiting (the caller among them),
// then hands the next call to the first request still waiting.
func (c *coalescer[In, Out]) lead(ctx context.Context) {
	c.mu.Lock()
	n, total := 0, 0
	for n < len(c.waiting) && (n == 0 || total+len(c.waiting[n].items) <= store.MaxBatch) {
		total += len(c.waiting[n].items)
		n++
	}
	batch := slices.Clone(c.waiting[:n])
	c.waiting = slices.Delete(c.waiting, 0, n)
	c.mu.Unlock()

	all := make([]In, 0, total)
	for _, b := range batch {
		all = append(all, b.items...)
	}
	cctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), c.clk, callTimeout)
	out, err := c.call(cctx, all)
	cancel()
	for _, b := range batch {
		b.err = err
		if err == nil {
			b.out, out = out[:len(b.items):len(b.items)], out[len(b.items):]
		}
		close(b.done)
	}

	c.mu.Lock()
	if len(c.waiting) > 0 {
		close(c.waiting[0].lead)
	} else {
		c.busy = false
	}
	c.mu.Unlock()
}

// call runs one store call. A panic or a short answer becomes the error of
// every request in the call, so that none waits for ever.
func (c *coalescer[In, Out]) call(ctx context.Context, items []In) (out []Out, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("store call panicked: %v", p)
		}
	}()
	out, err = c.run(ctx, items)
	if err == nil && len(out) != len(items) {
		out, err = nil, fmt.Errorf("store call answered %d results for %d items", len(out), len(items))
	}
	return out, err
}

// claimRuns claims with runs, one claim of a queue at a time. A shared
// call would split a key's run among its receives, so each receive
// claims on its own; but when a group's messages become claimable, every
// receive waiting on the queue wakes, and all but one would find the
// group taken. So a receive that finds another's claim in flight waits
// for it: if that claim took fewer than it asked for, the queue had
// nothing more to give as it ended, and the receive returns nothing, as
// its own claim would have (its long poll goes on); else it claims next.
func (s *sharedClaims) claimRuns(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	for {
		s.mu.Lock()
		rc := s.runs[c.Queue]
		if rc == nil {
			rc = &runClaim{done: make(chan struct{})}
			s.runs[c.Queue] = rc
			s.mu.Unlock()
			ds, err := s.Store.Claim(ctx, c)
			rc.short = err == nil && len(ds) < c.Max
			s.mu.Lock()
			delete(s.runs, c.Queue)
			s.mu.Unlock()
			close(rc.done)
			return ds, err
		}
		s.mu.Unlock()
		select {
		case <-rc.done:
			if rc.short {
				return nil, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
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
// receives in the order they joined, each getting at most its Max. A
// queue and lease's entry lives while receives use it: the last to
// leave deletes it, so that the map holds only the claims in flight,
// however many queues and visibility timeouts come and go.
type sharedClaims struct {
	store.Store
	clk    clock.Clock
	mu     sync.Mutex
	claims map[claimKey]*sharedClaim
	// runs holds, by queue, the claim with runs in flight.
	runs map[string]*runClaim
}

// runClaim is a claim with runs in flight; short, once done is closed,
// says that it took fewer messages than it asked for.
type runClaim struct {
	done  chan struct{}
	short bool
}

// sharedClaim is the coalescer of one queue and lease, and how many
// receives use it.
type sharedClaim struct {
	co    *coalescer[struct{}, *store.Delivery]
	users int
}

func (s *sharedClaims) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	if c.Max < 1 || c.Max > store.MaxBatch {
		return s.Store.Claim(ctx, c) // the store names the problem
	}
	if c.Runs {
		return s.claimRuns(ctx, c)
	}
	k := claimKey{c.Queue, c.LeaseDuration}
	s.mu.Lock()
	sc := s.claims[k]
	if sc == nil {
		sc = &sharedClaim{co: newCoalescer(s.clk, func(ctx context.Context, slots []struct{}) ([]*store.Delivery, error) {
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
		})}
		s.claims[k] = sc
	}
	sc.users++
	s.mu.Unlock()
	got, err := sc.co.do(ctx, make([]struct{}, c.Max))
	s.mu.Lock()
	if sc.users--; sc.users == 0 {
		delete(s.claims, k)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []store.Delivery
	for _, d := range got {
		if d != nil {
			out = append(out, *d)
		}
	}
	if ctx.Err() != nil && len(out) > 0 {
		// The receive gave up while its call ran: its messages go back at
		// once, and their receive does not count.
		rctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), s.clk, callTimeout)
		defer cancel()
		for _, d := range out {
			// One that cannot be given back comes back when its lease ends.
			_ = s.Store.Release(rctx, store.Release{Lease: d.Lease, Uncount: true})
		}
		return nil, ctx.Err()
	}
	return out, nil
}
