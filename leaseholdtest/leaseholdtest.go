// Package leaseholdtest helps test programs that use leasehold: assert that
// a job was enqueued (or was not, or that exactly these were), run a
// handler on a job without a client, and get a PostgreSQL store of one's
// own for each test.
package leaseholdtest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/jobmeta"
	"github.com/leasehold/leasehold/store"
	"github.com/leasehold/leasehold/store/postgres"
)

// RequireOpts narrows what RequireEnqueued, RequireNotEnqueued and
// RequireManyEnqueued look for: a job matches when each field that is set
// matches it.
type RequireOpts struct {
	// Queue is the job's queue. Default: the kind's own (its
	// EnqueueOpts), or leasehold.DefaultQueue.
	Queue string
	// Key, when set, is the job's key.
	Key string
	// Priority, when not nil, is the job's priority.
	Priority *int
	// MaxDeliveries, when positive, is the job's delivery budget.
	MaxDeliveries int
	// ScheduledAt, when not zero, is when the job runs (or ran): its
	// enqueue time, delay or RunAt, to the microsecond, as the stores
	// keep it.
	ScheduledAt time.Time
	// State, when set, is the job's state. Default: waiting to run,
	// pending (delayed included) or behind its key.
	State leasehold.JobState
}

// ExpectedJob is one job RequireManyEnqueued expects: its args (of any
// kind), and what else it must match.
type ExpectedJob struct {
	Args leasehold.JobArgs
	Opts *RequireOpts
}

// lister lists a page of a store's jobs, in a transaction or not.
type lister func(context.Context, store.ListFilter) ([]store.Info, error)

func txLister[TTx any](st store.TxLister[TTx], tx TTx) lister {
	return func(ctx context.Context, f store.ListFilter) ([]store.Info, error) { return st.ListTx(ctx, tx, f) }
}

// RequireEnqueued fails tb unless st holds a job of T's kind, on the queue
// opts names, whose args equal want once both are encoded as JSON (a
// client with another Codec needs its own check), matching every other
// field opts sets; by default it must be waiting to run (pending, delayed
// or behind its key). It returns the first such job.
func RequireEnqueued[T leasehold.JobArgs](ctx context.Context, tb testing.TB, st store.Store, want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	return requireEnqueued(ctx, tb, st.List, want, opts)
}

// RequireEnqueuedTx is RequireEnqueued inside the caller's transaction tx,
// before it commits: it sees the jobs tx enqueued (with Client.EnqueueTx)
// and what had committed before. st is the store the client was built on:
// a *postgres.Store with a pgx.Tx, its SQL() view or a *sqlite.Store with
// a *sql.Tx, a *memory.Store with store.NoTx.
func RequireEnqueuedTx[T leasehold.JobArgs, TTx any](ctx context.Context, tb testing.TB, st store.TxLister[TTx], tx TTx, want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	return requireEnqueued(ctx, tb, txLister(st, tx), want, opts)
}

func requireEnqueued[T leasehold.JobArgs](ctx context.Context, tb testing.TB, list lister, want T, opts *RequireOpts) *leasehold.Job[T] {
	tb.Helper()
	e := expect(tb, want, opts)
	var seen []string
	for _, in := range e.candidates(ctx, tb, list) {
		if !e.sameJob(in) {
			continue
		}
		if !e.matches(in) {
			seen = append(seen, describe(in))
			continue
		}
		job := &leasehold.Job[T]{ID: in.ID, Kind: in.Kind, Queue: in.Queue, Key: in.Key, Attempt: in.Deliveries,
			MaxDeliveries: in.MaxDeliveries, Priority: in.Priority, FencingToken: in.FencingToken, EnqueuedAt: in.EnqueuedAt,
			Metadata: jobmeta.Decode(in.Attributes)}
		if err := json.Unmarshal(in.Payload, &job.Args); err != nil {
			tb.Fatalf("leaseholdtest: decode job %d: %v", in.ID, err)
		}
		return job
	}
	tb.Fatalf("leaseholdtest: no %s; jobs of the kind with those args there: %q", e, seen)
	return nil
}

// RequireNotEnqueued fails tb if st holds a job that RequireEnqueued would
// find with the same arguments: one of T's kind, with args equal to want,
// matching every field opts sets.
func RequireNotEnqueued[T leasehold.JobArgs](ctx context.Context, tb testing.TB, st store.Store, want T, opts *RequireOpts) {
	tb.Helper()
	requireNotEnqueued(ctx, tb, st.List, want, opts)
}

// RequireNotEnqueuedTx is RequireNotEnqueued inside the caller's
// transaction tx, as RequireEnqueuedTx is RequireEnqueued.
func RequireNotEnqueuedTx[T leasehold.JobArgs, TTx any](ctx context.Context, tb testing.TB, st store.TxLister[TTx], tx TTx, want T, opts *RequireOpts) {
	tb.Helper()
	requireNotEnqueued(ctx, tb, txLister(st, tx), want, opts)
}

func requireNotEnqueued(ctx context.Context, tb testing.TB, list lister, want leasehold.JobArgs, opts *RequireOpts) {
	tb.Helper()
	e := expect(tb, want, opts)
	for _, in := range e.candidates(ctx, tb, list) {
		if e.sameJob(in) && e.matches(in) {
			tb.Fatalf("leaseholdtest: want no %s; found %s", e, describe(in))
			return
		}
	}
}

// RequireManyEnqueued fails tb unless the jobs of the kinds in want that
// st holds on the queues and in the states want names (for each, as
// RequireEnqueued reads its options) are exactly the jobs of want, in
// enqueue order: as many, and each matching its expected job. Jobs of
// other kinds are left out of the count. It returns the jobs found.
func RequireManyEnqueued(ctx context.Context, tb testing.TB, st store.Store, want []ExpectedJob) []*leasehold.JobRow {
	tb.Helper()
	return requireManyEnqueued(ctx, tb, st.List, want)
}

// RequireManyEnqueuedTx is RequireManyEnqueued inside the caller's
// transaction tx, as RequireEnqueuedTx is RequireEnqueued.
func RequireManyEnqueuedTx[TTx any](ctx context.Context, tb testing.TB, st store.TxLister[TTx], tx TTx, want []ExpectedJob) []*leasehold.JobRow {
	tb.Helper()
	return requireManyEnqueued(ctx, tb, txLister(st, tx), want)
}

func requireManyEnqueued(ctx context.Context, tb testing.TB, list lister, want []ExpectedJob) []*leasehold.JobRow {
	tb.Helper()
	if len(want) == 0 {
		tb.Fatalf("leaseholdtest: RequireManyEnqueued: no jobs expected; use RequireNotEnqueued")
		return nil
	}
	expected := make([]*expectation, len(want))
	kinds := map[string]bool{}
	for i, w := range want {
		expected[i] = expect(tb, w.Args, w.Opts)
		kinds[w.Args.Kind()] = true
	}
	// Every job of the kinds, on every queue and in every state named,
	// once each, in id order.
	found := map[int64]store.Info{}
	for _, e := range expected {
		for _, in := range e.candidates(ctx, tb, list) {
			if kinds[in.Kind] {
				found[in.ID] = in
			}
		}
	}
	ids := slices.Sorted(maps.Keys(found))
	rows := make([]*leasehold.JobRow, len(ids))
	for i, id := range ids {
		rows[i] = leasehold.JobRowOf(found[id])
	}
	report := func() string {
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "\n\t%s", describe(found[id]))
		}
		return b.String()
	}
	if len(ids) != len(want) {
		tb.Fatalf("leaseholdtest: %d jobs of the kinds expected, want %d; found:%s", len(ids), len(want), report())
		return nil
	}
	for i, e := range expected {
		if in := found[ids[i]]; !e.sameJob(in) || !e.matches(in) {
			tb.Fatalf("leaseholdtest: job %d of %d is not a %s; found:%s", i+1, len(want), e, report())
			return nil
		}
	}
	return rows
}

// expectation is a job a test expects: its kind, its args encoded as
// JSON, and its options with their defaults.
type expectation struct {
	kind     string
	argsJSON []byte
	opts     RequireOpts
	states   []store.State
}

func expect(tb testing.TB, args leasehold.JobArgs, opts *RequireOpts) *expectation {
	tb.Helper()
	if args == nil {
		tb.Fatalf("leaseholdtest: the expected job's args are nil")
		return &expectation{}
	}
	e := &expectation{kind: args.Kind()}
	if opts != nil {
		e.opts = *opts
	}
	if e.opts.Queue == "" {
		e.opts.Queue = leasehold.DefaultQueue
		if d, ok := args.(leasehold.JobArgsWithOpts); ok && d.EnqueueOpts().Queue != "" {
			e.opts.Queue = d.EnqueueOpts().Queue
		}
	}
	var err error
	if e.argsJSON, err = json.Marshal(args); err != nil {
		tb.Fatalf("leaseholdtest: encode the expected %s args: %v", e.kind, err)
	}
	if e.opts.State == "" {
		e.states = []store.State{store.Pending, store.Waiting}
	} else {
		for s := range store.States {
			if leasehold.JobRowOf(store.Info{State: store.State(s)}).State == e.opts.State {
				e.states = append(e.states, store.State(s))
			}
		}
		if len(e.states) == 0 {
			tb.Fatalf("leaseholdtest: %q is not a job state", e.opts.State)
		}
	}
	return e
}

// candidates lists the jobs on e's queue in e's states, in id order per
// state.
func (e *expectation) candidates(ctx context.Context, tb testing.TB, list lister) []store.Info {
	tb.Helper()
	var out []store.Info
	for _, state := range e.states {
		var after int64
		for {
			infos, err := list(ctx, store.ListFilter{Queue: e.opts.Queue, State: state, AfterID: after, Limit: store.MaxBatch})
			if err != nil {
				tb.Fatalf("leaseholdtest: list queue %q: %v", e.opts.Queue, err)
				return nil
			}
			out = append(out, infos...)
			if len(infos) < store.MaxBatch {
				break
			}
			after = infos[len(infos)-1].ID
		}
	}
	return out
}

// sameJob reports whether in is of e's kind and args.
func (e *expectation) sameJob(in store.Info) bool {
	return in.Kind == e.kind && jsonEqual(in.Payload, e.argsJSON)
}

// matches reports whether in matches each option e sets.
func (e *expectation) matches(in store.Info) bool {
	o := e.opts
	return (o.Key == "" || in.Key == o.Key) &&
		(o.Priority == nil || in.Priority == *o.Priority) &&
		(o.MaxDeliveries <= 0 || in.MaxDeliveries == o.MaxDeliveries) &&
		(o.ScheduledAt.IsZero() || in.VisibleAt.Truncate(time.Microsecond).Equal(o.ScheduledAt.Truncate(time.Microsecond)))
}

// String describes e as a job to look for.
func (e *expectation) String() string {
	o := e.opts
	b := fmt.Sprintf("%s job with args %s on queue %q", e.kind, e.argsJSON, o.Queue)
	if o.Key != "" {
		b += fmt.Sprintf(", key %q", o.Key)
	}
	if o.Priority != nil {
		b += fmt.Sprintf(", priority %d", *o.Priority)
	}
	if o.MaxDeliveries > 0 {
		b += fmt.Sprintf(", max deliveries %d", o.MaxDeliveries)
	}
	if !o.ScheduledAt.IsZero() {
		b += ", scheduled at " + o.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	if o.State != "" {
		return b + ", " + string(o.State)
	}
	return b + ", waiting to run"
}

// describe describes a stored job in the terms RequireOpts uses.
func describe(in store.Info) string {
	return fmt.Sprintf("job %d: %s %s on queue %q, key %q, priority %d, max deliveries %d, scheduled at %s, %s",
		in.ID, in.Kind, in.Payload, in.Queue, in.Key, in.Priority, in.MaxDeliveries,
		in.VisibleAt.UTC().Format(time.RFC3339Nano), leasehold.JobRowOf(in).State)
}

// jsonEqual compares two JSON texts as values, not as bytes.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// NewJob returns a job of args as a handler sees it on its first
// delivery: ID 1, attempt 1, fencing token 1, with the queue, key,
// priority and delivery budget the kind's own options give (its
// EnqueueOpts), else leasehold.DefaultQueue and 5 deliveries. Change its
// fields to test other cases.
func NewJob[T leasehold.JobArgs](args T) *leasehold.Job[T] {
	var o leasehold.EnqueueOptions
	if d, ok := any(args).(leasehold.JobArgsWithOpts); ok {
		o = d.EnqueueOpts()
	}
	return &leasehold.Job[T]{ID: 1, Args: args, Kind: args.Kind(), Queue: cmp.Or(o.Queue, leasehold.DefaultQueue), Key: o.Key,
		Priority: o.Priority, Attempt: 1, MaxDeliveries: cmp.Or(o.MaxDeliveries, store.DefaultMaxDeliveries), FencingToken: 1,
		Metadata: maps.Clone(o.Metadata)}
}

// Work runs h on job as the client would: the args go through the JSON
// encoding they are stored in first, so a handler test also catches args
// that do not survive it. It returns h's result; a panic in h is returned
// as an error, as the client records it. See WorkWith for a clock and a
// maximum processing time.
func Work[T leasehold.JobArgs](ctx context.Context, h leasehold.Handler[T], job *leasehold.Job[T]) error {
	return WorkWith(ctx, h, job, WorkConfig{})
}

// WorkConfig sets how WorkWith runs a handler. The zero value is Work.
type WorkConfig struct {
	// Clock times MaxProcessingTime. Default: the system clock. A fake
	// clock (package clock/clocktest) lets a test reach the limit without
	// waiting for it.
	Clock clock.Clock
	// MaxProcessingTime, when positive, cancels the handler's context with
	// cause leasehold.ErrMaxProcessingTime once it has run that long, as
	// the client does. Default: the kind's own (its WorkOpts), if any.
	MaxProcessingTime time.Duration
}

// WorkWith is Work under cfg.
func WorkWith[T leasehold.JobArgs](ctx context.Context, h leasehold.Handler[T], job *leasehold.Job[T], cfg WorkConfig) (err error) {
	b, err := json.Marshal(job.Args)
	if err != nil {
		return fmt.Errorf("leaseholdtest: encode the %s args: %w", job.Kind, err)
	}
	stored := *job
	var args T
	if err := json.Unmarshal(b, &args); err != nil {
		return fmt.Errorf("leaseholdtest: decode the %s args: %w", job.Kind, err)
	}
	stored.Args = args
	if d, ok := any(args).(leasehold.JobArgsWithWorkOpts); ok && cfg.MaxProcessingTime == 0 {
		cfg.MaxProcessingTime = d.WorkOpts().MaxProcessingTime
	}
	if cfg.MaxProcessingTime > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		limit := clock.OrSystem(cfg.Clock).AfterFunc(cfg.MaxProcessingTime, func() { cancel(leasehold.ErrMaxProcessingTime) })
		defer func() {
			limit.Stop()
			cancel(context.Canceled)
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("leaseholdtest: the %s handler panicked: %v", job.Kind, v)
		}
	}()
	return h(ctx, &stored)
}

// PostgresStore returns a store in a fresh schema of the PostgreSQL
// database at dsn, migrated; the schema is dropped and the store closed
// when the test ends. Tests that use it may run in parallel.
func PostgresStore(tb testing.TB, dsn string) *postgres.Store {
	tb.Helper()
	ctx := context.Background()
	pc, err := postgres.PoolConfig(dsn)
	if err != nil {
		tb.Fatalf("leaseholdtest: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		tb.Fatalf("leaseholdtest: %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "leasehold_test_" + hex.EncodeToString(b[:])
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		pool.Close()
		tb.Fatalf("leaseholdtest: migrate schema %s: %v", schema, err)
	}
	st, err := postgres.Open(ctx, postgres.Config{Pool: pool, Schema: schema})
	if err != nil {
		pool.Close()
		tb.Fatalf("leaseholdtest: open schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		st.Close()
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("leaseholdtest: drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	return st
}
