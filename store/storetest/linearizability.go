package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/clock/clocktest"
	"github.com/leasehold/leasehold/store"
)

// The operations of the linearizability test, on one message of its own
// store.
type opKind int

const (
	opClaim opKind = iota
	opExtend
	opComplete
	opReap
	opAdvance
	opRelease
	opCompleteLate
)

var opNames = [...]string{"claim", "extend", "complete", "reap", "advance", "release", "complete late"}

// opWeights makes completions rare, so that most of a history is claims,
// extensions, releases, reaps and time passing on a live message.
var opWeights = [...]int{opClaim: 25, opExtend: 20, opComplete: 2, opReap: 15, opAdvance: 20, opRelease: 18, opCompleteLate: 2}

func pickOp(rng *rand.Rand) opKind {
	total := 0
	for _, w := range opWeights {
		total += w
	}
	n := rng.IntN(total)
	for k, w := range opWeights {
		if n < w {
			return opKind(k)
		}
		n -= w
	}
	return opAdvance
}

// linInput is an operation's input; part names the store (the partition).
type linInput struct {
	part  int
	kind  opKind
	token int64         // extend, complete
	d     time.Duration // advance
	// contended marks a claim that ran while another operation on the
	// part's message was under way, and so may have found it locked. It is
	// filled in once the history is complete.
	contended bool
}

// linOutput is its result.
type linOutput struct {
	ok    bool  // claim got the message; extend, complete, release went through; reap recovered it
	token int64 // claim's new token
}

// leaseState is the model: a fenced lease on one message, in the time of
// the store's clock.
type leaseState struct {
	state   store.State // Pending, Processing or Completed
	token   int64       // the current lease's token
	last    int64       // the highest token minted
	expires time.Duration
	now     time.Duration
}

const (
	linLease  = 3 * time.Second
	linExtend = 3 * time.Second
)

// leaseModel says which results a fenced lease allows, one operation at a
// time: a claim takes a pending message and mints a larger token; extend
// complete and release succeed only under the current, unexpired lease; the
// reaper returns an expired lease's message to pending, and only such a one;
// a late completion succeeds under the last token minted, whatever the
// expiry, while the message is processing or pending, and changes nothing
// when it completed the message before. With skipLocked, a contended claim may also find nothing.
func leaseModel(skipLocked bool) porcupine.Model {
	return porcupine.Model{
		Partition: partitionByMessage,
		Init:      func() any { return leaseState{state: store.Pending} },
		Step: func(s, in, out any) (bool, any) {
			return leaseStep(skipLocked, s.(leaseState), in.(linInput), out.(linOutput))
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linInput), out.(linOutput)
			return fmt.Sprintf("%s(%d, %v, contended %v) -> %v %d", opNames[i.kind], i.token, i.d, i.contended, o.ok, o.token)
		},
	}
}

// partitionByMessage splits a history into its parts, one per message.
func partitionByMessage(history []porcupine.Operation) [][]porcupine.Operation {
	byPart := map[int][]porcupine.Operation{}
	for _, op := range history {
		p := op.Input.(linInput).part
		byPart[p] = append(byPart[p], op)
	}
	out := make([][]porcupine.Operation, 0, len(byPart))
	for _, ops := range byPart {
		out = append(out, ops)
	}
	return out
}

// leaseStep is the model's transition: whether operation i could have
// returned o in state st, and the state after it.
func leaseStep(skipLocked bool, st leaseState, i linInput, o linOutput) (bool, leaseState) {
	switch i.kind {
	case opClaim:
		if st.state != store.Pending {
			return !o.ok, st
		}
		if !o.ok && skipLocked && i.contended {
			return true, st
		}
		if !o.ok || o.token <= st.last {
			return false, st
		}
		st.state, st.token, st.last, st.expires = store.Processing, o.token, o.token, st.now+linLease
		return true, st
	case opExtend, opComplete, opRelease:
		// These succeed exactly under the current, unexpired lease.
		live := st.state == store.Processing && st.now < st.expires
		if !live || i.token != st.token {
			return !o.ok, st
		}
		if !o.ok {
			return false, st
		}
		switch i.kind {
		case opExtend:
			st.expires = st.now + linExtend
		case opComplete:
			st.state = store.Completed
		case opRelease:
			st.state = store.Pending
		}
		return true, st
	case opCompleteLate:
		if i.token != st.token || st.state != store.Processing && st.state != store.Pending && st.state != store.Completed {
			return !o.ok, st
		}
		st.state = store.Completed
		return o.ok, st
	case opReap:
		// A reaper skips rows another reaper is recovering (SKIP
		// LOCKED), so recovering nothing is always allowed; what is
		// checked is that it never takes back a live lease.
		if !o.ok {
			return true, st
		}
		if st.state == store.Processing && st.now >= st.expires {
			st.state = store.Pending
			return true, st
		}
		return false, st
	case opAdvance:
		st.now += i.d
		return true, st
	}
	return false, st
}

// markContended sets contended on every claim whose interval overlaps that
// of another operation on the same message, other than a clock step (which
// touches no store).
func markContended(history []porcupine.Operation) {
	for i := range history {
		in := history[i].Input.(linInput)
		if in.kind != opClaim {
			continue
		}
		for j, other := range history {
			o := other.Input.(linInput)
			if j != i && o.part == in.part && o.kind != opAdvance && other.Call < history[i].Return && history[i].Call < other.Return {
				in.contended = true
				break
			}
		}
		history[i].Input = in
	}
}

// testLinearizable records histories of concurrent claims, extensions,
// completions, reaps and clock steps, each part on a store of its own with
// one message, and checks them against the model of a fenced lease.
func testLinearizable(t *testing.T, f Factory, o options) {
	t.Parallel()
	const (
		parts   = 4
		clients = 3
		opsEach = 100
	)
	var (
		seq     atomic.Int64
		mu      sync.Mutex
		history []porcupine.Operation
	)
	var wg sync.WaitGroup
	for p := range parts {
		clk := clocktest.New()
		s := f(t, clk)
		b := &linPart{bundle: &bundle{t: t, ctx: t.Context(), clk: clk, s: s, queue: fmt.Sprintf("lin-%d", p)}}
		b.id = b.enqueue(store.NewMessage{MaxDeliveries: store.MaxDeliveriesLimit})[0]
		// The tokens claims got in this part, for extend, complete and
		// release to use.
		var tokensMu sync.Mutex
		var tokens []int64
		for c := range clients {
			rng := rand.New(rand.NewPCG(uint64(p), uint64(c)))
			wg.Go(func() {
				for range opsEach {
					in := linInput{part: p, kind: pickOp(rng)}
					if in.kind == opExtend || in.kind == opComplete || in.kind == opRelease || in.kind == opCompleteLate {
						tokensMu.Lock()
						if len(tokens) == 0 {
							in.kind = opClaim
						} else {
							in.token = tokens[rng.IntN(len(tokens))]
						}
						tokensMu.Unlock()
					}
					if in.kind == opAdvance {
						in.d = time.Duration(rng.IntN(3)) * time.Second
					}
					call := seq.Add(1)
					out, err := b.linStep(in)
					ret := seq.Add(1)
					if err != nil {
						t.Errorf("%s: %v", opNames[in.kind], err)
						return
					}
					if in.kind == opClaim && out.ok {
						tokensMu.Lock()
						tokens = append(tokens, out.token)
						tokensMu.Unlock()
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: p*clients + c, Input: in, Output: out, Call: call, Return: ret})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	markContended(history)
	res, _ := porcupine.CheckOperationsVerbose(leaseModel(o.claimsSkipLocked), history, time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("the history of %d operations is not linearizable as a fenced lease (result %s)", len(history), res)
	}
}

// linPart is one part: a store with one message.
type linPart struct {
	*bundle
	id int64
	// clockMu keeps the clock still during each store operation: an
	// operation reads the time when it checks a lease and commits a moment
	// later, holding the message's row lock in between, and a clock step
	// inside that window has no single point in the history where it could
	// have happened. (Real time moves continuously, which is the same
	// thing; the heartbeat's margin of two thirds of the lease absorbs it.)
	// Everything else runs concurrently.
	clockMu sync.RWMutex
}

// linStep runs one operation on the store.
func (b *linPart) linStep(in linInput) (linOutput, error) {
	if in.kind == opAdvance {
		b.clockMu.Lock()
		defer b.clockMu.Unlock()
	} else {
		b.clockMu.RLock()
		defer b.clockMu.RUnlock()
	}
	switch in.kind {
	case opClaim:
		ds, err := b.s.Claim(b.ctx, store.Claim{Queue: b.queue, WorkerID: "lin", Max: 1, LeaseDuration: linLease})
		if err != nil || len(ds) == 0 {
			return linOutput{}, err
		}
		return linOutput{ok: true, token: ds[0].FencingToken}, nil
	case opExtend:
		res, err := b.s.Extend(b.ctx, []store.Lease{b.leaseOf(in.token)}, linExtend)
		return linOutput{ok: err == nil && len(res.Lost) == 0}, err
	case opComplete, opCompleteLate:
		errs, err := b.s.Complete(b.ctx, []store.Completion{{Lease: b.leaseOf(in.token), Late: in.kind == opCompleteLate}})
		if err != nil {
			return linOutput{}, err
		}
		if errs[0] != nil && !errors.Is(errs[0], store.ErrLeaseLost) {
			return linOutput{}, errs[0]
		}
		return linOutput{ok: errs[0] == nil}, nil
	case opRelease:
		err := b.s.Release(b.ctx, store.Release{Lease: b.leaseOf(in.token)})
		if errors.Is(err, store.ErrLeaseLost) {
			return linOutput{}, nil
		}
		return linOutput{ok: err == nil}, err
	case opReap:
		rec, err := b.s.Reap(b.ctx)
		return linOutput{ok: len(rec) > 0}, err
	case opAdvance:
		b.clk.Advance(in.d)
		return linOutput{ok: true}, nil
	}
	return linOutput{}, fmt.Errorf("unknown operation %d", in.kind)
}

// leaseOf returns the lease of the part's one message under token.
func (b *linPart) leaseOf(token int64) store.Lease {
	return store.Lease{MessageID: b.id, FencingToken: token}
}
