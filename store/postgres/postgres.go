// Package postgres is the store.Store for users who outgrow one machine: any
// number of worker processes on any number of machines share one
// PostgreSQL database.
//
// Claims use FOR UPDATE SKIP LOCKED; lease expiry and visibility come from
// the database's clock, so workers with skewed clocks agree; batches are one
// statement each; LISTEN/NOTIFY wakes long-polling receivers in every
// process at once. Per-key order holds under concurrency: only a key's head
// is ever claimable, a unique index allows one head per key, and every
// transaction that lines a message up behind a key or lets the next one go
// holds that key's advisory lock.
//
// The tables live in one schema (DefaultSchema unless configured), created
// and upgraded by Migrate.
package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// Config configures a Store.
type Config struct {
	// Pool is an existing connection pool. The store does not close it.
	// When nil, the store opens its own pool from DSN.
	Pool *pgxpool.Pool
	// DSN is a PostgreSQL connection string, used when Pool is nil.
	DSN string
	// Schema holds the tables. Default DefaultSchema.
	Schema string
	// Clock, when set, is the time authority instead of the database's
	// now(): for tests. Leave it nil in production.
	Clock clock.Clock
	// Options are the settings every backend shares.
	Options store.Options
	// ListenRetry is how long the LISTEN connection waits before it
	// reconnects after losing its connection. Default 1s.
	ListenRetry time.Duration
	// PollOnly opens no LISTEN connection, for a database reached through
	// a pooler that cannot hold one (PgBouncer in transaction mode):
	// receivers then learn of other processes' messages at their next
	// poll, within their poll interval, and of this process's at once. A
	// DSN can ask for it with leasehold_listen=off. A pool the store opens
	// from DSN then prepares no named statements either, which such a
	// pooler breaks: its DefaultQueryExecMode is
	// pgx.QueryExecModeCacheDescribe instead of pgx's default. A Pool
	// given for such a pooler needs that setting by hand.
	PollOnly bool
}

// Store is a store.Store in PostgreSQL.
type Store struct {
	store.Store
	core *storecore.Store
	b    *backend
}

// backend runs the store's statements; storecore checks what reaches it.
type backend struct {
	wake    *storecore.Wakeups
	pool    *pgxpool.Pool
	ownPool bool
	schema  string
	channel string
	clk     clock.Clock // nil: the database's clock
	opts    store.Options
	sql     *sqlstate.Statements[query]

	stopListen context.CancelFunc
	listenDone chan struct{}
	listening  chan struct{} // closed once LISTEN first succeeds
}

var _ store.Store = (*Store)(nil)

// DefaultConnectTimeout bounds each connection attempt when the DSN does
// not set connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// PoolConfig parses a DSN (a postgres:// URL or libpq's keyword/value form)
// into a pool configuration, with DefaultConnectTimeout unless the DSN sets
// a timeout of its own. A password may come from the DSN, PGPASSWORD or a
// password file (PGPASSFILE, default ~/.pgpass), as libpq reads them.
// The DSN's leasehold_listen parameter (on or off, see Config.PollOnly) is
// leasehold's, not the server's: it is taken out, so a pool built from this
// configuration and given to Open as Config.Pool needs Config.PollOnly set
// by hand. With leasehold_listen=off, connections of the pool prepare no
// named statements, as Config.PollOnly says.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	pc, _, err := parseDSN(dsn)
	return pc, err
}

// parseDSN is PoolConfig, and it reports whether the DSN asks for
// PollOnly.
func parseDSN(dsn string) (*pgxpool.Config, bool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, false, fmt.Errorf("postgres store: %w: DSN: %v", store.ErrInvalid, err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	listen, set := pc.ConnConfig.RuntimeParams[listenParam]
	delete(pc.ConnConfig.RuntimeParams, listenParam)
	if set && listen != "on" && listen != "off" {
		return nil, false, fmt.Errorf("postgres store: %w: DSN: %s=%q: want on or off", store.ErrInvalid, listenParam, listen)
	}
	pollOnly := listen == "off"
	if pollOnly {
		forPooler(pc.ConnConfig)
	}
	return pc, pollOnly, nil
}

// forPooler keeps the connections of a pool from preparing named
// statements, which a pooler in transaction mode breaks: it runs each
// transaction on whichever server connection is free, where another
// client's statement may hold the name already (an error) or this
// client's is missing. Statement descriptions are cached in the client
// instead, and every execution sends its statement unnamed, in the same
// round trip. A DSN's own default_query_exec_mode other than pgx's default
// is kept.
func forPooler(cc *pgx.ConnConfig) {
	if cc.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
}

// listenParam is the DSN parameter that turns LISTEN off.
const listenParam = "leasehold_listen"

// Open connects to the database and checks that the schema is at this
// code's version (see Migrate). Unless PollOnly, it starts a LISTEN
// connection that wakes this process's long polls on every enqueue
// anywhere.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if err := CheckSchema(cfg.Schema); err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if cfg.ListenRetry < 0 {
		return nil, fmt.Errorf("postgres store: %w: ListenRetry is %s, must not be negative", store.ErrInvalid, cfg.ListenRetry)
	}
	if cfg.ListenRetry == 0 {
		cfg.ListenRetry = time.Second
	}
	s := &backend{wake: new(storecore.Wakeups), pool: cfg.Pool, schema: cfg.Schema, channel: "leasehold_" + cfg.Schema, clk: cfg.Clock, opts: cfg.Options.WithDefaults()}
	if s.pool == nil {
		if cfg.DSN == "" {
			return nil, fmt.Errorf("postgres store: %w: neither Pool nor DSN is set", store.ErrInvalid)
		}
		pc, pollOnly, err := parseDSN(cfg.DSN)
		if err != nil {
			return nil, err
		}
		cfg.PollOnly = cfg.PollOnly || pollOnly
		if cfg.PollOnly {
			forPooler(pc.ConnConfig)
		}
		if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, fmt.Errorf("postgres store: connect: %w", err)
		}
		s.ownPool = true
	}
	if err := checkVersion(ctx, s.pool, s.schema); err != nil {
		s.closePool()
		return nil, err
	}
	var err error
	if s.sql, err = loadQueries(s.schema); err != nil {
		s.closePool()
		return nil, fmt.Errorf("postgres store: queries.sql: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.stopListen, s.listenDone, s.listening = cancel, make(chan struct{}), make(chan struct{})
	if cfg.PollOnly {
		close(s.listenDone)
	} else {
		go s.listen(lctx, cfg.ListenRetry)
	}
	core := storecore.New(storecore.Config{Name: "postgres store", Options: s.opts, Wakeups: s.wake}, s)
	return &Store{Store: core, core: core, b: s}, nil
}

func (s *backend) closePool() {
	if s.ownPool {
		s.pool.Close()
	}
}

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.b.pool }

// Listening returns a channel closed once the store's LISTEN connection is
// first established; until then only polling notices other processes'
// enqueues. With PollOnly it is never closed.
func (s *Store) Listening() <-chan struct{} { return s.b.listening }

// DeleteQueue deletes the queue, then once more what a move that held its
// record committed into it meanwhile (see deleteQueue in queries.sql), in
// one transaction. A reap that holds a message of the queue and moves a
// dead letter into it waits for the record while this waits for the
// message: the server rolls one back, and it runs again.
func (s *backend) DeleteQueue(ctx context.Context, queue string) (int, error) {
	var n, late int
	err := s.inTxAgain(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, s.sql.Text(qDeleteQueue), replan, queue).Scan(&n); err != nil {
			return err
		}
		return tx.QueryRow(ctx, s.sql.Text(qPurgeQueue), replan, queue).Scan(&late)
	})
	if err != nil {
		return 0, err
	}
	return n + late, nil
}

func (s *backend) PurgeQueue(ctx context.Context, queue string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, s.sql.Text(qPurgeQueue), replan, queue).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}

func (s *backend) CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error) {
	text, err := storecore.EncodeQueueAttributes(attrs)
	if err != nil {
		return store.QueueInfo{}, false, err
	}
	var info store.QueueInfo
	var created bool
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.sql.Text(qCreateQueue), replan, s.now(), queue, text)
		if err != nil {
			return err
		}
		made, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		created = len(made) == 1
		// A statement of its own, so that it sees a record another
		// transaction made while the insert waited for it.
		info, err = s.queueRecord(ctx, tx, s.sql.Text(qQueueRecord), queue)
		return err
	})
	if err != nil {
		return store.QueueInfo{}, false, err
	}
	return info, created, nil
}

func (s *backend) QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error) {
	return s.queueRecord(ctx, s.pool, s.sql.Text(qQueueRecord), queue)
}

func (s *backend) SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error) {
	var info store.QueueInfo
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		old, err := s.queueRecord(ctx, tx, s.sql.Text(qLockQueueRecord), queue)
		if err != nil {
			return err
		}
		merged, text, err := storecore.MergeEncoded(queue, old.Attributes, attrs)
		if err != nil {
			return err
		}
		info = old
		info.Attributes = merged
		if err := tx.QueryRow(ctx, s.sql.Text(qSetQueueAttributes), replan, s.now(), queue, text).Scan(&info.UpdatedAt); err != nil {
			return err
		}
		info.UpdatedAt = info.UpdatedAt.UTC()
		return nil
	})
	if err != nil {
		return store.QueueInfo{}, err
	}
	return info, nil
}

// queueRecord reads a queue's record with query (queueRecord or
// lockQueueRecord) through q, the pool or a transaction.
func (s *backend) queueRecord(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, query, queue string) (store.QueueInfo, error) {
	info := store.QueueInfo{Queue: queue}
	var text *string
	err := q.QueryRow(ctx, query, replan, queue).Scan(&info.Paused, &text, &info.CreatedAt, &info.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.QueueInfo{}, storecore.NoQueue(queue)
	}
	if err != nil {
		return store.QueueInfo{}, err
	}
	if info.Attributes, err = storecore.DecodeQueueAttributes(deref(text)); err != nil {
		return store.QueueInfo{}, fmt.Errorf("queue %q: %w", queue, err)
	}
	info.CreatedAt, info.UpdatedAt = info.CreatedAt.UTC(), info.UpdatedAt.UTC()
	return info, nil
}

func (s *backend) Queues(ctx context.Context) ([]string, error) {
	return s.names(ctx, qQueues)
}

func (s *backend) QueuePage(ctx context.Context, after, before string, limit int) ([]string, error) {
	if before != "" {
		return s.names(ctx, qQueuesBefore, before, limit)
	}
	return s.names(ctx, qQueuesAfter, after, limit)
}

// names runs a statement that lists queue names.
func (s *backend) names(ctx context.Context, q query, args ...any) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.sql.Text(q), append([]any{replan}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Ping checks the database with a round trip.
func (s *backend) Ping(ctx context.Context) error {
	return s.pool.Ping(ctx)
}

// CheckWrite commits a change of one row: it fails on a standby and in a
// session whose transactions are read-only.
func (s *backend) CheckWrite(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql.Text(qCheckWrite), replan)
	return err
}

// ServerSecret reads the name's secret, so that a standby whose secret
// exists serves it; when there is none it keeps fresh unless a concurrent
// call kept its own first, and reads again in a statement of its own,
// which sees what that call committed.
func (s *backend) ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	var secret []byte
	err := s.pool.QueryRow(ctx, s.sql.Text(qSecret), replan, name).Scan(&secret)
	if !errors.Is(err, pgx.ErrNoRows) {
		return secret, err
	}
	if _, err := s.pool.Exec(ctx, s.sql.Text(qKeepSecret), replan, name, fresh); err != nil {
		return nil, err
	}
	err = s.pool.QueryRow(ctx, s.sql.Text(qSecret), replan, name).Scan(&secret)
	return secret, err
}

// Close stops the LISTEN connection and, if the store opened its own pool,
// closes it.
func (s *backend) Close() error {
	s.stopListen()
	<-s.listenDone
	s.closePool()
	return nil
}

// listen keeps a LISTEN connection open and turns notifications into
// wakeups. After a lost connection it wakes every waiter, since
// notifications may have been missed, and reconnects.
func (s *backend) listen(ctx context.Context, retry time.Duration) {
	defer close(s.listenDone)
	// The injected clock is the store's time authority for tests; a
	// reconnect delay must not move it, so this wait runs on real time.
	sys := clock.System()
	var once sync.Once
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() { once.Do(func() { close(s.listening) }) })
		if ctx.Err() != nil {
			return
		}
		_ = err // the connection is gone; polling covers the gap until it is back
		s.wake.NotifyAll()
		if sys.Sleep(ctx, retry) != nil {
			return
		}
	}
}

func (s *backend) listenOnce(ctx context.Context, ready func()) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	// Notifications sent while no connection listened are lost: let every
	// waiter look again now that one does.
	s.wake.NotifyAll()
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == "" {
			s.wake.NotifyCancellation() // see settleTx.Cancel
			continue
		}
		s.wake.Notify(n.Payload)
	}
}

// replan makes PostgreSQL plan a statement at every execution: pgx sends it
// as the unnamed statement, whose plan is never reused. The best plan for the
// messages table depends on its size, and a plan cached while the table was
// small (a new table, or one that VACUUM truncated after its queue drained)
// keeps its sequential scans as the table grows again: claims and
// completions would read every row, completed ones included, until an
// ANALYZE. The price is planning every statement: at 1,000 messages/s
// offered, about 0.7 ms more enqueue-to-start latency at the median when
// it was measured; batches spread it over their messages.
const replan = pgx.QueryExecModeCacheDescribe

// now is the first argument of every statement: the injected clock's time,
// or NULL, which the statements read as the database's now().
func (s *backend) now() any {
	if s.clk == nil {
		return nil
	}
	return s.clk.Now()
}

func (s *backend) begin(ctx context.Context) (pgx.Tx, error) {
	// READ COMMITTED whatever the server's default: key order relies on
	// each statement seeing what committed before a key's lock was granted.
	return s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
}

// inTx runs fn in a transaction and commits it.
func (s *backend) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// lockKeys takes the transaction-scoped advisory locks of the given
// (queue, key) or (queue, dedup id) names, in a fixed order so that two
// transactions never wait on each other in a cycle.
func (s *backend) lockKeys(ctx context.Context, r runner, names []string) error {
	if names = distinct(names); len(names) == 0 {
		return nil
	}
	return r.lock(ctx, names)
}

func (s *backend) pgxRunner(tx pgxTx) runner { return pgxRunner{tx: tx, st: s.sql} }

func keyLock(queue, key string) string { return "k\x1f" + queue + "\x1f" + key }

// enqueueLocks appends the lock names enqueueing msgs takes: each key's and
// each dedup id's.
func enqueueLocks(names []string, msgs []store.NewMessage) []string {
	for _, m := range msgs {
		if m.Key != "" {
			names = append(names, keyLock(m.Queue, m.Key))
		}
		if m.DedupID != "" {
			names = append(names, dedupLock(m.Queue, m.DedupID))
		}
		if m.UniqueKey != "" {
			names = append(names, "u\x1f"+m.UniqueKey)
		}
	}
	return names
}

// needsLocks reports whether enqueueing msgs takes locks: whether any
// message has a key, a dedup id or a unique key.
func needsLocks(msgs []store.NewMessage) bool {
	return slices.ContainsFunc(msgs, func(m store.NewMessage) bool { return m.Key != "" || m.DedupID != "" || m.UniqueKey != "" })
}

// placed reports whether m is placed in the claim order by a fairness
// group, which takes index lookups (see insertPlaced).
func placed(m store.NewMessage) bool { return m.FairGroup != "" }

func dedupLock(queue, id string) string { return "d\x1f" + queue + "\x1f" + id }

// notify wakes receivers of the queues in other processes once tx commits,
// and adds the queues to wake, for the caller to wake this process's
// receivers after the commit (storecore does, through the store's
// Wakeups): a wakeup here must not wait for the LISTEN connection.
func (s *backend) notify(ctx context.Context, r runner, queues []string, wake *[]string) error {
	if len(queues) == 0 {
		return nil
	}
	queues = distinct(queues)
	if wake != nil {
		*wake = append(*wake, queues...)
	}
	return r.notify(ctx, s.channel, queues)
}

// distinct sorts names and drops repeats, in place.
func distinct(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}

func (s *backend) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	if !needsLocks(msgs) {
		// Without keys, dedup ids or unique keys nothing needs a lock: the
		// insert and its notification go in one round trip, as one
		// implicit transaction, where BEGIN and COMMIT would take two more.
		return s.insertUnlocked(ctx, s.pool, msgs, nil)
	}
	var out []store.Enqueued
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.enqueueTx(ctx, s.pgxRunner(tx), msgs, nil)
		return err
	})
	return out, err
}

// EnqueueTx enqueues messages inside the caller's transaction (the
// transactional outbox): they exist, and receivers everywhere are woken,
// only if the caller commits.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, msgs []store.NewMessage) ([]store.Enqueued, error) {
	return s.enqueueIn(ctx, s.b.pgxRunner(tx), msgs)
}

// EnqueueSQLTx is EnqueueTx for a database/sql transaction on the same
// database, with any PostgreSQL driver (pgx's stdlib, lib/pq).
func (s *Store) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, msgs []store.NewMessage) ([]store.Enqueued, error) {
	return s.enqueueIn(ctx, sqlRunner{tx}, msgs)
}

// SQLStore is the store with database/sql transactions: its EnqueueTx
// takes a *sql.Tx on the same database, so that a program whose own
// queries go through database/sql can enqueue in its transactions, and a
// client built on it (leasehold.NewClient) takes *sql.Tx in EnqueueTx.
type SQLStore struct{ *Store }

// EnqueueTx is Store.EnqueueSQLTx.
func (s SQLStore) EnqueueTx(ctx context.Context, tx *sql.Tx, msgs []store.NewMessage) ([]store.Enqueued, error) {
	return s.EnqueueSQLTx(ctx, tx, msgs)
}

// SQL returns the store with database/sql transactions.
func (s *Store) SQL() SQLStore { return SQLStore{s} }

// enqueueIn enqueues in the caller's transaction.
func (s *Store) enqueueIn(ctx context.Context, r runner, msgs []store.NewMessage) ([]store.Enqueued, error) {
	msgs, err := s.core.CheckEnqueue(msgs)
	if err != nil {
		return nil, err
	}
	out, err := s.b.enqueueIn(ctx, r, msgs)
	return out, s.core.Failed("enqueue", err)
}

func (s *backend) enqueueIn(ctx context.Context, r runner, msgs []store.NewMessage) ([]store.Enqueued, error) {
	if needsLocks(msgs) {
		// Per-key order and dedup rely on each statement seeing what
		// committed before the key's lock was granted: a snapshot taken
		// earlier could line a message up behind a head already gone.
		var level string
		if err := r.queryRow(ctx, s.sql.Text(qIsolation), nil, &level); err != nil {
			return nil, err
		}
		if level != "read committed" {
			return nil, fmt.Errorf("%w: messages with keys or dedup ids need a READ COMMITTED transaction, this one is %s", store.ErrInvalid, level)
		}
	}
	return s.enqueueTx(ctx, r, msgs, nil)
}

func (s *backend) enqueueTx(ctx context.Context, r runner, msgs []store.NewMessage, wake *[]string) ([]store.Enqueued, error) {
	if tx := r.pgx(); tx != nil && !needsLocks(msgs) {
		return s.insertUnlocked(ctx, tx, msgs, wake)
	}
	if err := s.lockKeys(ctx, r, enqueueLocks(nil, msgs)); err != nil {
		return nil, err
	}
	out := make([]store.Enqueued, len(msgs))
	queues := make([]string, 0, 1)
	for i := range msgs {
		var err error
		if out[i], err = s.insertOne(ctx, r, &msgs[i]); err != nil {
			return nil, err
		}
		queues = append(queues, msgs[i].Queue)
	}
	return out, s.notify(ctx, r, queues, wake)
}

// batcher sends statements in one round trip: a pool runs them in one
// implicit transaction, a transaction inside itself.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// insertUnlocked inserts messages that take no lock in one round trip,
// with the notification of their queues: by insertPlaced when any is of
// a fairness group, else by insertBulk.
func (s *backend) insertUnlocked(ctx context.Context, to pgxTx, msgs []store.NewMessage, wake *[]string) ([]store.Enqueued, error) {
	if slices.ContainsFunc(msgs, placed) {
		return s.insertPlaced(ctx, to, msgs, wake)
	}
	return s.insertBulk(ctx, to, msgs, wake)
}

// insertBulk inserts messages without keys, dedup ids or fairness groups
// in one statement and sends the notification of their queues in the
// same round trip; it adds the queues to wake as notify does. The
// statements are prepared once, as a batch's are: the insert reads no
// index.
func (s *backend) insertBulk(ctx context.Context, to batcher, msgs []store.NewMessage, wake *[]string) ([]store.Enqueued, error) {
	b := &pgx.Batch{}
	b.Queue(s.sql.Text(qInsertBulk), append([]any{s.now()}, bulkColumns(msgs)...)...)
	woken := queuesOf(msgs)
	b.Queue(s.sql.Text(qNotify), s.channel, woken)
	br := to.SendBatch(ctx, b)
	var ids []int64
	rows, err := br.Query()
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return inserted(ids, err, len(msgs), woken, wake)
}

// insertPlaced inserts messages that take no lock, some of them
// of fairness groups, with the notification of their queues, in one
// statement planned at its execution (see replan), as the placement
// reads indexes; it adds the queues to wake as notify does.
func (s *backend) insertPlaced(ctx context.Context, q pgxTx, msgs []store.NewMessage, wake *[]string) ([]store.Enqueued, error) {
	groups := make([]*string, len(msgs))
	for i := range msgs {
		groups[i] = nullable(msgs[i].FairGroup)
	}
	args := append([]any{replan, s.now()}, bulkColumns(msgs)...)
	var ids []int64
	var notified int64
	err := q.QueryRow(ctx, s.sql.Text(qInsertPlaced), append(args, groups, s.channel)...).Scan(&ids, &notified)
	return inserted(ids, err, len(msgs), queuesOf(msgs), wake)
}

// bulkColumns gives the columns insertBulk and insertPlaced take, one
// array each, from the queue to the dead-letter queue.
func bulkColumns(msgs []store.NewMessage) []any {
	n := len(msgs)
	queues, replies, kinds := make([]string, n), make([]*string, n), make([]*string, n)
	payloads, maxes, delays, priorities := make([][]byte, n), make([]int32, n), make([]int64, n), make([]int16, n)
	// A nil element is NULL: a message without attributes, or without a
	// dead-letter queue.
	attributes := make([][]byte, n)
	dlqs := make([]*string, n)
	for i, m := range msgs {
		dlqs[i] = nullable(m.DeadLetterQueue)
		queues[i], payloads[i], maxes[i], delays[i] = m.Queue, m.Payload, int32(m.MaxDeliveries), micros(m.Delay)
		attributes[i] = m.Attributes
		priorities[i] = int16(m.Priority)
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		replies[i], kinds[i] = nullable(m.ReplyTo), nullable(m.Kind)
	}
	return []any{queues, replies, payloads, maxes, delays, kinds, priorities, attributes, dlqs}
}

// queuesOf gives the queues of msgs, sorted, each once.
func queuesOf(msgs []store.NewMessage) []string {
	queues := make([]string, len(msgs))
	for i, m := range msgs {
		queues[i] = m.Queue
	}
	return distinct(queues)
}

// inserted gives the outcome of a statement that inserted n messages as
// ids, and adds the queues it notified, woken, to wake.
func inserted(ids []int64, err error, n int, woken []string, wake *[]string) ([]store.Enqueued, error) {
	if err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("inserted %d rows for %d messages", len(ids), n)
	}
	if wake != nil {
		*wake = append(*wake, woken...)
	}
	// Identities are drawn in insertion order, which follows the input.
	slices.Sort(ids)
	out := make([]store.Enqueued, n)
	for i, id := range ids {
		out[i] = store.Enqueued{ID: id}
	}
	return out, nil
}

// insertOne inserts one message, lining it up behind its key and checking
// its unique key and dedup id. The caller holds their locks.
func (s *backend) insertOne(ctx context.Context, r runner, m *store.NewMessage) (store.Enqueued, error) {
	if m.UniqueKey != "" {
		var id int64
		err := r.queryRow(ctx, s.sql.Text(qUniqueGet), []any{m.UniqueKey, storecore.StateMask(m.UniqueStates)}, &id)
		switch {
		case err == nil:
			return store.Enqueued{ID: id, Duplicate: true}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Enqueued{}, err
		}
	}
	if m.DedupID != "" {
		var id int64
		var fresh bool
		err := r.queryRow(ctx, s.sql.Text(qDedupGet), []any{s.now(), m.Queue, m.DedupID, micros(s.opts.DedupWindow)}, &id, &fresh)
		switch {
		case err == nil && fresh:
			return store.Enqueued{ID: id, Duplicate: true}, nil
		case err == nil:
			if err := r.exec(ctx, s.sql.Text(qDedupClear), id); err != nil {
				return store.Enqueued{}, err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Enqueued{}, err
		}
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	var id int64
	err := r.queryRow(ctx, s.sql.Text(qInsertOne), []any{s.now(), m.Queue, nullable(m.Key), nullable(m.DedupID), nullable(m.ReplyTo),
		payload, int32(m.MaxDeliveries), micros(m.Delay), nullable(m.Kind), int16(m.Priority), nullBytes(m.Attributes),
		nullable(m.DeadLetterQueue), nullable(m.FairGroup), nullable(m.UniqueKey)}, &id)
	return store.Enqueued{ID: id}, err
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullBytes stores nil (none) as NULL, through either runner.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func (s *backend) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	args := []any{s.now(), c.Queue, c.Max, c.WorkerID, micros(c.LeaseDuration)}
	// A claim costs more to plan than to run: it is prepared once per
	// connection, its plan kept index-backed by indexScans, sent with it
	// in one round trip and one implicit transaction.
	b := &pgx.Batch{}
	b.Queue(s.sql.Text(qIndexScans))
	if c.Runs {
		b.Queue(s.sql.Text(qClaimRuns), append(args, c.Independent)...)
	} else {
		b.Queue(s.sql.Text(qClaim), args...)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	// Room for the whole claim at once, made at its first row (a claim
	// that finds nothing makes none): a delivery is large, and a slice
	// grown row by row allocates about twice what it keeps. Every row is
	// read into the same variables, allocated once for the claim.
	var out []store.Delivery
	var d store.Delivery
	var key, reply, dedup, kind, source *string
	var attempt, max int32
	var priority int16
	dest := []any{&d.MessageID, &key, &d.Payload, &reply, &dedup, &attempt, &max, &d.EnqueuedAt, &d.FencingToken,
		&d.LeaseExpires, &kind, &priority, &d.Attributes, &d.FirstClaimedAt, &source}
	// A plain claim's rows come in the order the update took them, each
	// with its visible_at; a claim with runs sorts its own.
	var visible time.Time
	var visibles []time.Time
	if !c.Runs {
		dest = append(dest, &visible)
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if out == nil {
			room := min(c.Max, claimRoom)
			out = make([]store.Delivery, 0, room)
			if !c.Runs {
				visibles = make([]time.Time, 0, room)
			}
		}
		out = append(out, store.Delivery{Lease: d.Lease, Queue: c.Queue, Key: deref(key), Payload: d.Payload, ReplyTo: deref(reply),
			DedupID: deref(dedup), Kind: deref(kind), Priority: int(priority), Attempt: int(attempt), MaxDeliveries: int(max),
			EnqueuedAt: d.EnqueuedAt.UTC(), LeaseExpires: d.LeaseExpires.UTC(), Attributes: d.Attributes, FirstClaimedAt: d.FirstClaimedAt.UTC(),
			DeadLetterSource: deref(source)})
		if !c.Runs {
			visibles = append(visibles, visible)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !c.Runs {
		sort.Sort(claimOrder{out, visibles})
	}
	return out, nil
}

// claimOrder sorts a claim's deliveries, with their visible_at, in the
// order the claim read them: the highest priority first, then the oldest
// visible, then the oldest.
type claimOrder struct {
	ds      []store.Delivery
	visible []time.Time
}

func (o claimOrder) Len() int { return len(o.ds) }

func (o claimOrder) Less(i, j int) bool {
	a, b := &o.ds[i], &o.ds[j]
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if c := o.visible[i].Compare(o.visible[j]); c != 0 {
		return c < 0
	}
	return a.MessageID < b.MessageID
}

func (o claimOrder) Swap(i, j int) {
	o.ds[i], o.ds[j] = o.ds[j], o.ds[i]
	o.visible[i], o.visible[j] = o.visible[j], o.visible[i]
}

// claimRoom bounds the room a claim makes for its deliveries before it
// knows how many it got.
const claimRoom = 1000

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func leaseArrays(n int, lease func(i int) store.Lease) (ids, fences []int64) {
	ids, fences = make([]int64, n), make([]int64, n)
	for i := range n {
		l := lease(i)
		ids[i], fences[i] = l.MessageID, l.FencingToken
	}
	return ids, fences
}

func (s *backend) Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error) {
	var res store.Extended
	extended := make(map[store.Lease]bool, len(leases))
	// One statement at least: an empty call reports the expiry too.
	for from := 0; from == 0 || from < len(leases); from += extendRows {
		chunk := leases[from:min(from+extendRows, len(leases))]
		expires, err := s.extendChunk(ctx, chunk, extension, extended)
		if err != nil {
			return store.Extended{}, err
		}
		if res.Expires.IsZero() || expires.Before(res.Expires) {
			res.Expires = expires
		}
	}
	res.Lost = storecore.LostLeases(leases, extended)
	if len(res.Lost) > 0 {
		ids, fences := leaseArrays(len(res.Lost), func(i int) store.Lease { return res.Lost[i] })
		rows, err := s.pool.Query(ctx, s.sql.Text(qCancelledOf), replan, ids, fences)
		if err != nil {
			return store.Extended{}, err
		}
		var l store.Lease
		if _, err := pgx.ForEachRow(rows, []any{&l.MessageID, &l.FencingToken}, func() error {
			res.Cancelled = append(res.Cancelled, l)
			return nil
		}); err != nil {
			return store.Extended{}, err
		}
	}
	return res, nil
}

// extendRows is the most leases one extension statement renews. A
// statement holds its rows' locks until it commits, and the completion of
// a lease whose handler ends meanwhile waits for them: in chunks, it waits
// for one chunk, not for the whole round. With ten thousand leases renewed
// in one statement, completions spent most of their time waiting on it
// (docs/benchmarks.md).
const extendRows = 500

// extendChunk renews leases in one statement, adds those it renewed to
// extended and returns their new expiry.
func (s *backend) extendChunk(ctx context.Context, leases []store.Lease, extension time.Duration, extended map[store.Lease]bool) (time.Time, error) {
	ids, fences := leaseArrays(len(leases), func(i int) store.Lease { return leases[i] })
	rows, err := s.pool.Query(ctx, s.sql.Text(qExtend), replan, s.now(), ids, fences, micros(extension))
	if err != nil {
		return time.Time{}, err
	}
	var expires time.Time
	var id, fence *int64
	_, err = pgx.ForEachRow(rows, []any{&id, &fence, &expires}, func() error {
		if id != nil {
			extended[store.Lease{MessageID: *id, FencingToken: *fence}] = true
		}
		return nil
	})
	return expires.UTC(), err
}

// deadIDs returns the ids to redrive or purge, locked: the given ones, each
// checked to be a dead message of the queue, or all of the queue's.
func (s *backend) deadIDs(ctx context.Context, tx pgx.Tx, queue string, ids []int64) ([]int64, []*string, error) {
	rows, err := tx.Query(ctx, s.sql.Text(qDeadRows), replan, queue, ids, len(ids) == 0)
	if err != nil {
		return nil, nil, err
	}
	var got []int64
	var keys []*string
	var id int64
	var key *string
	if _, err := pgx.ForEachRow(rows, []any{&id, &key}, func() error {
		got = append(got, id)
		keys = append(keys, key)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if len(ids) > 0 {
		found := make(map[int64]bool, len(got))
		for _, id := range got {
			found[id] = true
		}
		for _, id := range ids {
			if !found[id] {
				return nil, nil, fmt.Errorf("%w: message %d is not a dead letter of queue %q", store.ErrNotFound, id, queue)
			}
		}
	}
	return got, keys, nil
}

func (s *backend) Redrive(ctx context.Context, queue string, ids []int64) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		got, keys, err := s.deadIDs(ctx, tx, queue, ids)
		if err != nil {
			return err
		}
		var locks []string
		for _, k := range keys {
			if k != nil {
				locks = append(locks, keyLock(queue, *k))
			}
		}
		if err := s.lockKeys(ctx, s.pgxRunner(tx), locks); err != nil {
			return err
		}
		for _, id := range got {
			if _, err := tx.Exec(ctx, s.sql.Text(qRedrive), replan, s.now(), id); err != nil {
				return err
			}
		}
		n = len(got)
		return s.notify(ctx, s.pgxRunner(tx), []string{queue}, nil)
	})
	return n, err
}

func (s *backend) Purge(ctx context.Context, queue string, ids []int64) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		got, _, err := s.deadIDs(ctx, tx, queue, ids)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, s.sql.Text(qPurge), replan, got)
		n = int(tag.RowsAffected())
		return err
	})
	return n, err
}

func (s *backend) Stats(ctx context.Context, queue string) (store.Stats, error) {
	st := store.Stats{Queue: queue}
	err := s.pool.QueryRow(ctx, s.sql.Text(qStats), replan, s.now(), queue).Scan(
		&st.Pending, &st.Waiting, &st.Processing, &st.Completed, &st.Dead, &st.BlockedKeys, &st.OldestPendingAge, &st.Paused, &st.Cancelled,
		&st.Delayed)
	if err != nil {
		return store.Stats{}, err
	}
	return st, nil
}

func (s *backend) AllStats(ctx context.Context) ([]store.Stats, error) {
	rows, err := s.pool.Query(ctx, s.sql.Text(qAllStats), replan, s.now())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (st store.Stats, err error) {
		err = r.Scan(&st.Queue, &st.Pending, &st.Waiting, &st.Processing, &st.Completed, &st.Dead, &st.BlockedKeys, &st.OldestPendingAge,
			&st.Paused, &st.Cancelled, &st.Delayed)
		return st, err
	})
}

func (s *backend) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	var m store.Maintainer
	err := s.pool.QueryRow(ctx, s.sql.Text(qHoldMaintainer), replan, s.now(), holder, micros(d)).Scan(&m.Holder, &m.Token, &m.Expires)
	m.Expires = m.Expires.UTC()
	return m, err
}

func (s *backend) ReleaseMaintainer(ctx context.Context, holder string, token int64) error {
	_, err := s.pool.Exec(ctx, s.sql.Text(qReleaseMaintainer), replan, holder, token)
	return err
}

func (s *backend) Pause(ctx context.Context, queue string) error {
	_, err := s.pool.Exec(ctx, s.sql.Text(qPause), replan, queue)
	return err
}

// Resume lets the queue run and wakes its receivers in every process.
func (s *backend) Resume(ctx context.Context, queue string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Text(qResume), replan, queue); err != nil {
			return err
		}
		return s.notify(ctx, s.pgxRunner(tx), []string{queue}, nil)
	})
}

// List lists through the pool.
func (s *backend) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	return s.listPgx(ctx, s.pool, f)
}

// ListTx is List inside the caller's transaction tx: it sees what tx has
// enqueued before it commits (a test's way to check an outbox).
func (s *Store) ListTx(ctx context.Context, tx pgx.Tx, f store.ListFilter) ([]store.Info, error) {
	f, err := s.core.CheckList(f)
	if err != nil {
		return nil, err
	}
	out, err := s.b.listPgx(ctx, tx, f)
	return out, s.core.Failed("list", err)
}

// ListTx is List inside a database/sql transaction tx on the same
// database.
func (s SQLStore) ListTx(ctx context.Context, tx *sql.Tx, f store.ListFilter) ([]store.Info, error) {
	f, err := s.core.CheckList(f)
	if err != nil {
		return nil, err
	}
	out, err := s.b.listSQL(ctx, tx, f)
	return out, s.core.Failed("list", err)
}

// listSQL lists through a database/sql transaction.
func (s *backend) listSQL(ctx context.Context, tx *sql.Tx, f store.ListFilter) ([]store.Info, error) {
	query, args := s.listQuery(f)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (store.Info, error) { return scanInfo(r) })
}

// listPgx lists through q, the pool or a pgx transaction.
func (s *backend) listPgx(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, f store.ListFilter) ([]store.Info, error) {
	query, args := s.listQuery(f)
	rows, err := q.Query(ctx, query, append([]any{replan}, args...)...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Info, error) { return scanInfo(r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// listQuery returns the statement that lists f, list or listBefore, and
// its arguments; a filter that is not set is NULL.
func (s *backend) listQuery(f store.ListFilter) (string, []any) {
	query := s.sql.InState(qList, f.State)
	var before any
	if f.BeforeID > 0 {
		query, before = s.sql.InState(qListBefore, f.State), f.BeforeID
	}
	return query, []any{f.Queue, f.AfterID, f.Limit, before, nullable(f.Key), nullable(f.Kind), nullable(string(f.Reason))}
}

func (s *backend) Get(ctx context.Context, id int64) (store.Info, error) {
	var history []byte
	var snoozes int32
	in, err := scanInfo(s.pool.QueryRow(ctx, s.sql.Text(qGet), replan, id), &history, &snoozes)
	in.Snoozes = int(snoozes)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Info{}, storecore.NoMessage("", id)
	}
	if err != nil {
		return store.Info{}, err
	}
	// with_error writes each entry as store.AttemptError reads it: the
	// time in RFC 3339.
	if history != nil {
		if err := json.Unmarshal(history, &in.Errors); err != nil {
			return store.Info{}, fmt.Errorf("message %d: error history: %w", id, err)
		}
		for i := range in.Errors {
			in.Errors[i].At = in.Errors[i].At.UTC()
		}
	}
	return in, nil
}

func (s *backend) BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error) {
	rows, err := s.pool.Query(ctx, s.sql.Text(qBlockedKeys), replan, queue, afterKey, limit)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.BlockedKey, error) {
		var k store.BlockedKey
		var err error
		k.Head, err = scanInfo(r, &k.Key, &k.Waiting)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanInfo reads a message's columns (those of the get statement), after
// the leading destinations (scanned first, as they are), from r: a row of
// a listing, of get or of blockedKeys. A row whose id is NULL, a head that
// the left join did not find, is the zero Info.
func scanInfo(r interface{ Scan(...any) error }, leading ...any) (store.Info, error) {
	var in store.Info
	var id, fence *int64
	var queue, key, dedup, worker, lastErr, reason, kind, dlq, source *string
	var state, priority *int16
	var deliveries, max *int32
	var enq, vis, locked, finished, first *time.Time
	dst := append(leading, &id, &queue, &state, &key, &dedup, &in.Payload, &deliveries, &max, &fence,
		&worker, &lastErr, &reason, &enq, &vis, &locked, &finished, &kind, &priority, &in.Attributes, &first, &dlq, &source)
	if err := r.Scan(dst...); err != nil {
		return store.Info{}, err
	}
	if id == nil {
		return store.Info{}, nil
	}
	in.ID, in.Queue, in.State = *id, deref(queue), store.State(*state)
	in.Key, in.DedupID, in.WorkerID, in.LastError, in.DeadReason = deref(key), deref(dedup), deref(worker), deref(lastErr), store.DeadReason(deref(reason))
	in.Kind, in.Priority = deref(kind), int(*priority)
	in.DeadLetterQueue, in.DeadLetterSource = deref(dlq), deref(source)
	in.Deliveries, in.MaxDeliveries, in.FencingToken = int(*deliveries), int(*max), *fence
	in.EnqueuedAt, in.VisibleAt = enq.UTC(), vis.UTC()
	if locked != nil && in.State == store.Processing {
		in.LeaseExpires = locked.UTC()
	}
	if finished != nil {
		in.FinishedAt = finished.UTC()
	}
	if first != nil {
		in.FirstClaimedAt = first.UTC()
	}
	return in, nil
}

func (s *backend) Prune(ctx context.Context, p store.Prune) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, s.sql.InState(qPrune, p.State), replan, s.now(), micros(p.OlderThan), micros(s.opts.DedupWindow), p.Limit,
		nullable(p.Queue)).Scan(&n)
	return n, err
}
