// Package demoscene sets a dashboard's worth of work going on a store: the
// scene that `leasehold demo --serve` shows and the README's screenshots
// are taken of. Several queues carry traffic that two in-process workers
// complete at a modest rate, some of it failing and retried, after an
// hour of it written into the past (Config.Past); a key's
// messages wait behind a long job of the same key; a dead letter carries a
// history of three errors; reports wait for their time; and a paused queue
// gathers a backlog.
//
// Every element is set before Start returns, so that whoever looks (a
// person, a test, a screenshot) finds it at once; the traffic then goes on
// until Stop.
package demoscene

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/internal/worker"
	"github.com/leasehold/leasehold/store"
)

// The scene's queues.
const (
	// Emails is busy: a few sends a second, a few of them turned away once
	// by the mail server and retried, and now and then an address that
	// bounces for good (dead at once).
	Emails = "emails"
	// Payments is keyed by customer: a customer's payments run one at a
	// time, in order. LaneKey's head is a long settlement that runs while
	// the scene does, with LaneWaiting payments of the key behind it.
	Payments = "payments"
	// Webhooks delivers events to partners; one partner is down, so the
	// scene's dead letters (Scene.DeadLetters) used up their three
	// deliveries on three different errors.
	Webhooks = "webhooks"
	// Reports holds builds scheduled for later: Delayed of them when the
	// scene starts.
	Reports = "reports"
	// Thumbnails is paused, for a deploy say: its backlog grows until
	// someone resumes it, and then the workers drain it.
	Thumbnails = "thumbnails"
)

// Queues are the scene's queues, by name.
var Queues = []string{Emails, Payments, Reports, Thumbnails, Webhooks}

const (
	// LaneKey is the key of Payments whose messages wait behind a running
	// one.
	LaneKey = "customer-1042"
	// LaneWaiting is how many of LaneKey's messages wait.
	LaneWaiting = 3
	// Delayed is how many reports are scheduled when the scene starts.
	Delayed = 5
	// DeadErrors is how many errors the dead letter's history holds: one
	// per delivery.
	DeadErrors = 3
	// Backlog is how many thumbnails wait in the paused queue when the
	// scene starts.
	Backlog = 24
)

// ErrInUse is Start's error on a store that holds queues already.
var ErrInUse = errors.New("demoscene: the database is in use")

// tick is the producer's period: each tick enqueues to some queues, about
// four messages a second in all.
const tick = 250 * time.Millisecond

// Config configures a scene.
type Config struct {
	// Store receives the scene. Required, and it must hold no queue yet:
	// the scene's counts and ids are its own.
	Store store.Store
	// Clock times the workers, the producer and the handlers' work.
	// Default: the system clock.
	Clock clock.Clock
	// Logger receives the workers' logs and the producer's. Default:
	// none.
	Logger *slog.Logger
	// Past, when set, opens another store of Store's database whose time
	// authority is clk: the scene sets clk to each minute of the hour
	// before it and works that minute's traffic there, so that it starts
	// with HistoryMinutes of completions behind it, for charts of
	// throughput that the database keeps. The scene closes that store
	// before Start returns. Nil: the scene starts with no history.
	Past func(ctx context.Context, clk clock.Clock) (store.Store, error)
}

// Scene is the work going on. Stop ends it.
type Scene struct {
	// DeadLetters are the ids of the webhooks to the partner that is
	// down, each dead after DeadErrors failed deliveries with an error of
	// its own.
	DeadLetters []int64
	// LaneHead is the id of LaneKey's running settlement, and LaneWaiters
	// those of the key's messages behind it, in order.
	LaneHead    int64
	LaneWaiters []int64

	st       store.Store
	clk      clock.Clock
	log      *slog.Logger
	workers  []*worker.Worker
	started  int
	runs     chan error
	cancel   context.CancelFunc
	produced chan struct{}
	// stopping ends the long settlement, which otherwise runs while the
	// scene does.
	stopping chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start sets the scene on cfg.Store and starts its workers and its
// producer, which run until Stop (not ctx: ctx bounds Start alone). It
// returns once every element of the scene is there; on an error, whatever
// it started is stopped.
func Start(ctx context.Context, cfg Config) (*Scene, error) {
	if cfg.Store == nil {
		return nil, errors.New("demoscene: Store is nil")
	}
	clk := cmp.Or[clock.Clock](cfg.Clock, clock.System())
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if qs, err := cfg.Store.Queues(ctx); err != nil {
		return nil, err
	} else if len(qs) > 0 {
		return nil, fmt.Errorf("%w: it holds %d queue(s) already (%s first), and the scene needs a database of its own", ErrInUse, len(qs), qs[0])
	}
	s := &Scene{st: cfg.Store, clk: clk, log: log, stopping: make(chan struct{}), produced: make(chan struct{}), runs: make(chan error, 2)}
	if cfg.Past != nil {
		if err := history(ctx, cfg.Past, clk.Now()); err != nil {
			return nil, err
		}
	}
	if err := s.seed(ctx); err != nil {
		return nil, err
	}
	var qcs []worker.QueueConfig
	for _, q := range Queues {
		qcs = append(qcs, worker.QueueConfig{Name: q, Concurrency: 4})
	}
	for i := range 2 {
		w, err := worker.New(worker.Config{Deps: maintenance.Deps{Store: cfg.Store, Clock: clk, Logger: log, Meter: maintenance.Meter(nil)},
			Queues: qcs, Handler: worker.HandlerFunc(s.handle), WorkerID: fmt.Sprintf("worker-%d", i+1),
			LeaseDuration: 30 * time.Second, HeartbeatInterval: 10 * time.Second,
			// The settlement runs while the scene does; everything else
			// takes well under a second.
			MaxProcessingTime: time.Minute, Kinds: map[string]worker.KindConfig{kindSettle: {MaxProcessingTime: 24 * time.Hour}},
			Backoff:  backoff.Exponential{Initial: time.Second, Max: 8 * time.Second},
			LongPoll: 5 * time.Second, PollInterval: 250 * time.Millisecond,
			ShutdownTimeout: 10 * time.Second, HardStopWait: worker.DefaultHardStopWait})
		if err != nil {
			_ = s.Stop(ctx)
			return nil, err
		}
		s.workers = append(s.workers, w)
	}
	for _, w := range s.workers {
		s.started++
		go func() { s.runs <- w.Run(context.WithoutCancel(ctx)) }()
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go s.produce(pctx)
	if err := s.waitSet(ctx); err != nil {
		return nil, errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
	}
	return s, nil
}

// seed enqueues what the workers make the scene of: the lane, the webhook
// that will die, the scheduled reports and the paused backlog.
func (s *Scene) seed(ctx context.Context) error {
	lane := []store.NewMessage{{Queue: Payments, Key: LaneKey, Kind: kindSettle,
		Payload: []byte(`{"customer":"customer-1042","invoice":"INV-2026-1042","lines":18240}`)}}
	for i, kind := range []string{"payment.charge", "payment.charge", "payment.refund"}[:LaneWaiting] {
		lane = append(lane, store.NewMessage{Queue: Payments, Key: LaneKey, Kind: kind,
			Payload: fmt.Appendf(nil, `{"customer":%q,"amount":%d,"currency":"EUR"}`, LaneKey, 1250*(i+1))})
	}
	ids, err := s.enqueue(ctx, lane)
	if err != nil {
		return err
	}
	s.LaneHead, s.LaneWaiters = ids[0], ids[1:]
	var down []store.NewMessage
	for i, event := range []string{"order.shipped", "order.paid", "refund.created"} {
		down = append(down, store.NewMessage{Queue: Webhooks, Kind: kindWebhook, MaxDeliveries: DeadErrors,
			Payload: fmt.Appendf(nil, `{"url":%q,"event":%q,"order":%d}`, downPartner, event, 73012+7*i)})
	}
	if s.DeadLetters, err = s.enqueue(ctx, down); err != nil {
		return err
	}
	var reports []store.NewMessage
	for i, r := range []struct {
		name string
		in   time.Duration
	}{{"daily-sales", 12 * time.Minute}, {"stock-levels", 47 * time.Minute}, {"weekly-digest", 3 * time.Hour},
		{"monthly-invoices", 9 * time.Hour}, {"audit-export", 20 * time.Hour}}[:Delayed] {
		reports = append(reports, store.NewMessage{Queue: Reports, Kind: "report.build", Delay: r.in,
			Payload: fmt.Appendf(nil, `{"report":%q,"format":"csv","run":%d}`, r.name, i+1)})
	}
	if _, err := s.enqueue(ctx, reports); err != nil {
		return err
	}
	if err := s.st.Pause(ctx, Thumbnails); err != nil {
		return err
	}
	var backlog []store.NewMessage
	for i := range Backlog {
		backlog = append(backlog, thumbnail(i))
	}
	_, err = s.enqueue(ctx, backlog)
	return err
}

func (s *Scene) enqueue(ctx context.Context, msgs []store.NewMessage) ([]int64, error) {
	out, err := s.st.Enqueue(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("demoscene: enqueue to %s: %w", msgs[0].Queue, err)
	}
	ids := make([]int64, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	return ids, nil
}

// waitSet waits until the workers have set what only they can: the
// settlement running, and the webhooks dead after their three errors.
func (s *Scene) waitSet(ctx context.Context) error {
	t := s.clk.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var states []store.State
		for _, id := range append([]int64{s.LaneHead}, s.DeadLetters...) {
			in, err := s.st.Get(ctx, id)
			if err != nil {
				return err
			}
			states = append(states, in.State)
		}
		if states[0] == store.Processing && !slices.ContainsFunc(states[1:], func(st store.State) bool { return st != store.Dead }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demoscene: waiting for the settlement to run (%s) and the webhooks to die (%v): %w", states[0], states[1:], context.Cause(ctx))
		case <-t.C():
		}
	}
}

// produce enqueues the traffic, tick by tick, until ctx ends.
func (s *Scene) produce(ctx context.Context) {
	defer close(s.produced)
	t := s.clk.NewTicker(tick)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		var msgs []store.NewMessage
		if n%2 == 0 {
			msgs = append(msgs, email(n/2))
		}
		if n%4 == 1 {
			msgs = append(msgs, payment(n/4))
		}
		if n%8 == 3 {
			msgs = append(msgs, webhook(n/8))
		}
		if n%16 == 7 {
			msgs = append(msgs, thumbnail(Backlog+n/16))
		}
		if len(msgs) == 0 {
			continue
		}
		// A failed enqueue drops this tick's traffic: the scene has
		// nothing to lose, and says so unless it is stopping.
		if _, err := s.st.Enqueue(ctx, msgs); err != nil && ctx.Err() == nil {
			s.log.Warn("demo scene: traffic not enqueued", "error", err)
		}
	}
}

// Stop stops the producer and the workers, gracefully within ctx: each
// message in hand is completed or given back. It returns the workers'
// errors. Safe more than once.
func (s *Scene) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		close(s.stopping)
		if s.cancel != nil {
			s.cancel()
			<-s.produced
		}
		errs := make([]error, len(s.workers))
		var wg sync.WaitGroup
		for i, w := range s.workers {
			wg.Go(func() { errs[i] = w.Shutdown(ctx) })
		}
		wg.Wait()
		for range s.started {
			errs = append(errs, <-s.runs)
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}
