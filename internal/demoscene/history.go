package demoscene

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// HistoryMinutes is how far back the scene's history reaches, when it has
// one (see Config.Past).
const HistoryMinutes = 60

// pausedFor is how long before the scene the paused queue stopped.
const pausedFor = 15

// pastClock is a clock whose wall time is set, for a store that records
// the past: the store reads nothing of its clock but Now.
type pastClock struct {
	clock.Clock
	at atomic.Int64
}

func (c *pastClock) Now() time.Time   { return time.Unix(0, c.at.Load()) }
func (c *pastClock) set(at time.Time) { c.at.Store(at.UnixNano()) }

// history works the hour before now on a store of cfg.Past: minute by
// minute, each queue's traffic enqueued and completed in that minute,
// some webhooks after a failure, at rates that rise and fall.
func history(ctx context.Context, past func(context.Context, clock.Clock) (store.Store, error), now time.Time) error {
	clk := &pastClock{Clock: clock.System()}
	clk.set(now.Add(-HistoryMinutes * time.Minute))
	st, err := past(ctx, clk)
	if err != nil {
		return fmt.Errorf("demoscene: open the store of the past: %w", err)
	}
	defer st.Close()
	n := 0
	for m := HistoryMinutes; m >= 1; m-- {
		minute := now.Add(-time.Duration(m) * time.Minute).Truncate(time.Minute)
		clk.set(minute.Add(5 * time.Second))
		// A slow wave over the hour, 0 to 20 and back every 40 minutes.
		wave := m % 40
		if wave > 20 {
			wave = 40 - wave
		}
		var msgs []store.NewMessage
		for i := range 80 + 3*wave {
			if e := email(n + i); !isBounce(e) {
				msgs = append(msgs, e)
			}
		}
		for i := range 25 + wave {
			// One payment of a customer a minute, so that each runs at once.
			p := payment(n + i)
			p.Key = fmt.Sprintf("customer-%d", 2001+i)
			msgs = append(msgs, p)
		}
		for i := range 15 + wave/2 {
			msgs = append(msgs, webhook(n+i))
		}
		if m > pausedFor {
			for i := range 8 + wave/3 {
				msgs = append(msgs, thumbnail(n+i))
			}
		}
		if m%20 == 0 {
			msgs = append(msgs, store.NewMessage{Queue: Reports, Kind: "report.build",
				Payload: fmt.Appendf(nil, `{"report":"hourly-orders","format":"csv","run":%d}`, m)})
		}
		n += len(msgs)
		if _, err := st.Enqueue(ctx, msgs); err != nil {
			return fmt.Errorf("demoscene: enqueue the past: %w", err)
		}
		clk.set(minute.Add(20 * time.Second))
		for _, q := range Queues {
			if err := workPast(ctx, st, clk, q, minute); err != nil {
				return err
			}
		}
	}
	return nil
}

func isBounce(m store.NewMessage) bool { return bytes.Contains(m.Payload, []byte(bounce)) }

// workPast claims and completes what q holds, failing once the webhooks
// that fail on their first delivery (by id, as the handler does); the
// retries run at once, in the same minute.
func workPast(ctx context.Context, st store.Store, clk *pastClock, q string, minute time.Time) error {
	for {
		ds, err := st.Claim(ctx, store.Claim{Queue: q, WorkerID: "worker-1", Max: store.MaxBatch, LeaseDuration: time.Minute})
		if err != nil {
			return fmt.Errorf("demoscene: claim the past of %s: %w", q, err)
		}
		if len(ds) == 0 {
			return nil
		}
		clk.set(minute.Add(40 * time.Second))
		var done []store.Completion
		for _, d := range ds {
			if q == Webhooks && d.Attempt == 1 && d.MessageID%5 == 0 {
				if _, err := st.Fail(ctx, store.Failure{Lease: d.Lease, Error: "POST https://hooks.shop.example.com/orders: 502 Bad Gateway"}); err != nil {
					return fmt.Errorf("demoscene: fail the past of %s: %w", q, err)
				}
				continue
			}
			done = append(done, store.Completion{Lease: d.Lease})
		}
		if len(done) > 0 {
			errs, err := st.Complete(ctx, done)
			if err == nil {
				err = errors.Join(errs...)
			}
			if err != nil {
				return fmt.Errorf("demoscene: complete the past of %s: %w", q, err)
			}
		}
	}
}
