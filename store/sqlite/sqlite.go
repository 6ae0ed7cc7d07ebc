// Package sqlite is the embedded store.Store: one SQLite file, no server,
// shared safely by several processes on one machine.
//
// The database runs in WAL mode with a busy timeout; every write is one
// IMMEDIATE transaction, so claims are atomic across processes. The schema
// is created and migrated when the store opens (unless Config.ReadOnly
// says not to), and a database written by a newer leasehold is refused with
// store.ErrSchemaTooNew. The file may hold an application's own tables too.
//
// Durability: by default every committed transaction is synced to disk
// (synchronous=FULL), so an acknowledged enqueue or completion survives a
// power failure; a claim's is not, and a power failure may undo the last
// claims, as if their leases had ended then, without ever handing out
// their fencing tokens again (durability.go has the rule and why it is
// safe). Synchronous "normal" syncs only at WAL checkpoints: faster
// writes, and still safe against a crash of the process, but a power loss
// or kernel crash can roll back the last transactions acknowledged.
// Concurrent writes share one transaction and one sync (gather.go).
//
// A new database file, and the -wal and -shm files SQLite keeps beside it,
// are readable and writable by their owner only (0600).
//
// The store's clock is the time authority: processes sharing a file share a
// host and so a clock.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
	"golang.org/x/sys/unix"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// SchemaVersion is the schema version this code writes.
var SchemaVersion = len(migrations())

func migrations() []string {
	ms := storecore.Migrations(migrationFiles)
	for i, m := range ms {
		ms[i] = sqlstate.Expand(m)
	}
	return ms
}

// Config configures a Store.
type Config struct {
	// Path is the database file. Required. It is created when missing.
	Path string
	// Clock is the store's time authority. Default: the system clock.
	Clock clock.Clock
	// Options are the settings every backend shares.
	Options store.Options
	// BusyTimeout is how long a write waits for another process's write
	// transaction. Default 10s.
	BusyTimeout time.Duration
	// Synchronous is how hard commits reach the disk: "full" (the default)
	// syncs every commit but a claim's; "normal" syncs at checkpoints
	// only, and a power failure may lose the last commits (see the
	// package comment).
	Synchronous string
	// ReadOnly opens an existing, migrated database for reading: nothing is
	// created or changed. A missing file, or one without the current
	// leasehold schema, is store.ErrNotMigrated.
	ReadOnly bool
	// NoCreate opens an existing leasehold database for writing, and
	// refuses any other: a missing file, or one without leasehold's tables,
	// is store.ErrNotMigrated and is left as it was (its bytes, its
	// journal mode, no -wal or -shm file beside it). A database at an older
	// leasehold schema version is migrated.
	NoCreate bool
}

// Store is a store.Store in a SQLite file.
type Store struct {
	store.Store
	core *storecore.Store
	b    *backend
}

// backend runs the store's transactions; storecore checks what reaches it.
type backend struct {
	wake *storecore.Wakeups
	db   *sql.DB
	clk  clock.Clock
	opts store.Options
	st   statements
	// sync is the synchronous setting of the store's commits; claims
	// commit at levelNormal (see durability.go).
	sync level
	// gather gathers concurrent writes into one transaction (gather.go).
	gather gathering
}

var _ store.Store = (*Store)(nil)

// Open opens (creating and migrating as needed) the database at cfg.Path.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("sqlite store: %w: Path is empty", store.ErrInvalid)
	}
	if strings.ContainsRune(cfg.Path, 0) {
		return nil, fmt.Errorf("sqlite store: %w: Path %q contains a NUL byte", store.ErrInvalid, cfg.Path)
	}
	switch cfg.Synchronous = strings.ToLower(cmp.Or(cfg.Synchronous, "full")); cfg.Synchronous {
	case "full", "normal":
	default:
		return nil, fmt.Errorf("sqlite store: %w: Synchronous %q: want full or normal", store.ErrInvalid, cfg.Synchronous)
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	if cfg.BusyTimeout < 0 {
		return nil, fmt.Errorf("sqlite store: %w: BusyTimeout is %s, must not be negative", store.ErrInvalid, cfg.BusyTimeout)
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 10 * time.Second
	}
	switch {
	case cfg.ReadOnly || cfg.NoCreate:
		if _, err := os.Stat(cfg.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("sqlite store: %s: %w", cfg.Path, store.ErrNotMigrated)
		}
	default:
		if err := create(cfg.Path); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	if cfg.NoCreate || cfg.ReadOnly {
		// Opening changes a foreign file: the WAL switch below, or the files
		// a read-only connection leaves. The schema is looked for first.
		if err := hasSchema(ctx, cfg.Path, q); err != nil {
			return nil, fmt.Errorf("sqlite store: %s: %w", cfg.Path, openError(cfg.Path, err))
		}
	}
	if cfg.NoCreate {
		q.Set("mode", "rw") // nor is a file created should it vanish now
	}
	if cfg.ReadOnly {
		q.Set("mode", "ro")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
	}
	q.Add("_pragma", "foreign_keys(OFF)")
	// 64 MiB of page cache (the default is 2 MiB): a backlog of a few
	// hundred thousand rows then stays in memory.
	q.Add("_pragma", "cache_size(-65536)")
	q.Set("_txlock", "immediate")
	// The path is a URI's path: characters SQLite would decode or take for
	// the query are escaped, so that the file is named as given.
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(cfg.Path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w", cfg.Path, err)
	}
	// One connection: SQLite has one writer at a time, and a second
	// connection in the same process would only wait on the first.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	b := &backend{wake: new(storecore.Wakeups), db: db, clk: clock.OrSystem(cfg.Clock), opts: cfg.Options.WithDefaults(), sync: level(cfg.Synchronous)}
	check := migrate
	if cfg.ReadOnly {
		check = checkVersion
	}
	if err := check(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store: %s: %w", cfg.Path, openError(cfg.Path, err))
	}
	if err := b.st.prepare(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite store: %s: %w", cfg.Path, err)
	}
	if !cfg.ReadOnly {
		if err := b.floorFence(ctx); err != nil {
			b.Close()
			return nil, fmt.Errorf("sqlite store: %s: fence: %w", cfg.Path, err)
		}
	}
	core := storecore.New(storecore.Config{Name: "sqlite store", Options: b.opts, Wakeups: b.wake}, b)
	return &Store{Store: core, core: core, b: b}, nil
}

// uriPath escapes a file path for a file: URI.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// create creates a missing database file with mode 0600; SQLite gives the
// -wal and -shm files it creates beside it the same mode.
func create(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("sqlite store: cannot create %s: directory %s is not writable", path, filepath.Dir(path))
	case err != nil:
		return fmt.Errorf("sqlite store: cannot create %s: %w", path, unwrapPath(err))
	}
	return f.Close()
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openError explains the failures a user can fix: SQLite's own words for a
// database it cannot write name neither the file nor the reason.
func openError(path string, err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "readonly database") && !strings.Contains(msg, "unable to open database file") {
		return err
	}
	dir := filepath.Dir(path)
	if unix.Access(dir, unix.W_OK) != nil {
		return fmt.Errorf("directory %s is not writable: SQLite keeps its -wal and -shm files beside the database", dir)
	}
	if unix.Access(path, unix.W_OK) != nil {
		return fmt.Errorf("the file is not writable")
	}
	return err
}

// hasSchema reports store.ErrNotMigrated unless the file at path holds
// leasehold's tables, looking through a read-only connection of its own
// (q its other settings) that changes nothing. Even a read-only connection
// leaves -wal and -shm files beside a database in WAL mode; without a -wal
// file everything is in the database file, which is then read as
// immutable: without locks, and without those files. With a -wal but no
// -shm, the -shm the look makes is removed after it.
func hasSchema(ctx context.Context, path string, q url.Values) error {
	ro := url.Values{}
	for k, v := range q {
		ro[k] = v
	}
	ro.Set("mode", "ro")
	if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		ro.Set("immutable", "1")
	} else if _, err := os.Stat(path + "-shm"); errors.Is(err, fs.ErrNotExist) {
		// A -wal left without its -shm: reading it makes a -shm, which
		// this look removes again once it is done.
		defer os.Remove(path + "-shm")
	}
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?"+ro.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	ok, err := hasTables(ctx, db)
	if err == nil && !ok {
		err = store.ErrNotMigrated
	}
	return err
}

// hasTables reports whether db holds leasehold's tables.
func hasTables(ctx context.Context, db *sql.DB) (bool, error) {
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'leasehold_messages'").Scan(&tables); err != nil {
		return false, fmt.Errorf("read schema: %w", err)
	}
	return tables > 0, nil
}

// checkVersion accepts a database at the current schema version only.
func checkVersion(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	tables, err := hasTables(ctx, db)
	if err != nil {
		return err
	}
	switch ms := migrations(); {
	case !tables:
		return store.ErrNotMigrated
	case v > len(ms):
		return fmt.Errorf("%w: the database is at schema version %d, this code knows versions up to %d", store.ErrSchemaTooNew, v, len(ms))
	case v < len(ms):
		return fmt.Errorf("schema version %d, this code needs %d: %w", v, len(ms), store.ErrNotMigrated)
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	ms := migrations()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(ms) {
		return fmt.Errorf("%w: the database is at schema version %d, this code knows versions up to %d", store.ErrSchemaTooNew, v, len(ms))
	}
	if v == len(ms) {
		return nil
	}
	for i := v; i < len(ms); i++ {
		if _, err := tx.ExecContext(ctx, ms[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(ms))); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return tx.Commit()
}

// DB returns the store's database handle, for transactions that enqueue
// with EnqueueTx.
func (s *Store) DB() *sql.DB { return s.b.db }

// Notify wakes this process's receivers of the queue: call it after
// committing a transaction that enqueued with EnqueueTx.
func (s *Store) Notify(queue string) { s.b.wake.Notify(queue) }

func (s *backend) DeleteQueue(ctx context.Context, queue string) (int, error) {
	var n int
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		var err error
		if n, err = s.purge(ctx, tx, queue); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.st.Text(qForgetQueue), queue)
		return err
	})
	return n, err
}

// PurgeQueue deletes the queue's messages and keeps its row in
// leasehold_queues: its pause and its record.
func (s *backend) PurgeQueue(ctx context.Context, queue string) (int, error) {
	var n int
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		var err error
		n, err = s.purge(ctx, tx, queue)
		return err
	})
	return n, err
}

// purge deletes every message of a queue and its completed count, which
// no trigger takes back (see migration 8), and returns how many messages.
func (s *backend) purge(ctx context.Context, tx *sql.Tx, queue string) (int, error) {
	res, err := tx.ExecContext(ctx, s.st.Text(qDeleteQueue), queue)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.st.Text(qForgetCounts), queue); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (s *backend) CreateQueue(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, bool, error) {
	var info store.QueueInfo
	var created bool
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		text, err := storecore.EncodeQueueAttributes(attrs)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.st.Text(qCreateQueue), queue, text, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		created = n == 1
		info, err = s.queueRecord(ctx, tx, queue)
		return err
	})
	if err != nil {
		return store.QueueInfo{}, false, err
	}
	return info, created, nil
}

func (s *backend) QueueInfo(ctx context.Context, queue string) (store.QueueInfo, error) {
	return s.queueRecord(ctx, s.db, queue)
}

func (s *backend) SetQueueAttributes(ctx context.Context, queue string, attrs map[string]string) (store.QueueInfo, error) {
	var info store.QueueInfo
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		old, err := s.queueRecord(ctx, tx, queue)
		if err != nil {
			return err
		}
		merged, text, err := storecore.MergeEncoded(queue, old.Attributes, attrs)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.st.Text(qSetQueueAttributes), queue, text, now); err != nil {
			return err
		}
		info = old
		info.Attributes, info.UpdatedAt = merged, fromMicros(now)
		return nil
	})
	if err != nil {
		return store.QueueInfo{}, err
	}
	return info, nil
}

// queueRecord reads a queue's record through q, the database or a
// transaction.
func (s *backend) queueRecord(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, queue string) (store.QueueInfo, error) {
	info := store.QueueInfo{Queue: queue}
	var text sql.NullString
	var created, updated int64
	err := q.QueryRowContext(ctx, s.st.Text(qQueueRecord), queue).Scan(&info.Paused, &text, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.QueueInfo{}, storecore.NoQueue(queue)
	}
	if err != nil {
		return store.QueueInfo{}, err
	}
	if info.Attributes, err = storecore.DecodeQueueAttributes(text.String); err != nil {
		return store.QueueInfo{}, fmt.Errorf("queue %q: %w", queue, err)
	}
	info.CreatedAt, info.UpdatedAt = fromMicros(created), fromMicros(updated)
	return info, nil
}

func (s *backend) HoldMaintainer(ctx context.Context, holder string, d time.Duration) (store.Maintainer, error) {
	var m store.Maintainer
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx, s.st.Text(qHoldMaintainer), holder, now, now+d.Microseconds()); err != nil {
			return err
		}
		var expires int64
		if err := tx.QueryRowContext(ctx, s.st.Text(qMaintainer)).Scan(&m.Holder, &m.Token, &expires); err != nil {
			return err
		}
		m.Expires = fromMicros(expires)
		return nil
	})
	return m, err
}

func (s *backend) ReleaseMaintainer(ctx context.Context, holder string, token int64) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, s.st.Text(qReleaseMaintainer), holder, token)
		return err
	})
}

func (s *backend) Pause(ctx context.Context, queue string) error {
	_, err := s.affected(ctx, s.st.Text(qPause), func(int64) []any { return []any{queue} })
	return err
}

func (s *backend) Resume(ctx context.Context, queue string) error {
	_, err := s.affected(ctx, s.st.Text(qResume), func(int64) []any { return []any{queue} })
	return err
}

// affected runs one statement in a write transaction, with arguments made
// from the transaction's time, and returns how many rows it changed.
func (s *backend) affected(ctx context.Context, query string, args func(now int64) []any) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		res, err := tx.ExecContext(ctx, query, args(now)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
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
	rows, err := s.db.QueryContext(ctx, s.st.Text(q), args...)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (q string, err error) { return q, r.Scan(&q) })
}

// Ping checks the database.
func (s *backend) Ping(ctx context.Context) error {
	return s.db.PingContext(ctx)
}

// CheckWrite commits a change of one row: it fails on a read-only file or
// connection, and when the disk has no room for the change.
func (s *backend) CheckWrite(ctx context.Context) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, s.st.Text(qCheckWrite))
		return err
	})
}

// ServerSecret reads the name's secret first, so that a read-only
// database whose secret exists serves it, then keeps fresh if it has none.
func (s *backend) ServerSecret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	var secret []byte
	err := s.db.QueryRowContext(ctx, s.st.Text(qSecret), name).Scan(&secret)
	if !errors.Is(err, sql.ErrNoRows) {
		return secret, err
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		if _, err := tx.ExecContext(ctx, s.st.Text(qKeepSecret), name, fresh); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, s.st.Text(qSecret), name).Scan(&secret)
	})
	return secret, err
}

// Close closes the database.
func (s *backend) Close() error {
	s.st.close()
	return s.db.Close()
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes stores nil (none) as NULL.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// txOn runs fn in one IMMEDIATE transaction of db, the database or one of
// its connections, at the current time.
func (s *backend) txOn(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, fn func(ctx context.Context, tx *sql.Tx, now int64) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(ctx, tx, micros(s.clk.Now())); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *backend) Enqueue(ctx context.Context, msgs []store.NewMessage) ([]store.Enqueued, error) {
	var out []store.Enqueued
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		var err error
		out, err = s.enqueueTx(ctx, tx, msgs, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EnqueueTx enqueues messages inside the caller's transaction, which must
// come from DB(); they become visible when it commits. The store has one
// connection and the transaction holds it: until the caller commits or rolls
// back, every other operation of the store in this process waits, lease
// extensions included, so keep such transactions short and make no other
// store call from inside one; nor close the store before it ends, as Close
// waits for the calls in flight, and they wait for it. Receivers in this
// process learn of them at their next poll, or at once if the caller calls
// Notify(queue) after the commit.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, msgs []store.NewMessage) ([]store.Enqueued, error) {
	msgs, err := s.core.CheckEnqueue(msgs)
	if err != nil {
		return nil, err
	}
	out, err := s.b.enqueueTx(ctx, tx, msgs, micros(s.b.clk.Now()))
	return out, s.core.Failed("enqueue", err)
}

func (s *backend) enqueueTx(ctx context.Context, tx *sql.Tx, msgs []store.NewMessage, now int64) ([]store.Enqueued, error) {
	var err error
	insert := tx.StmtContext(ctx, s.st.prepared[qInsert])
	out := make([]store.Enqueued, len(msgs))
	for i := range msgs {
		if out[i], err = s.enqueueOne(ctx, tx, insert, &msgs[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *backend) enqueueOne(ctx context.Context, tx *sql.Tx, insert *sql.Stmt, m *store.NewMessage, now int64) (store.Enqueued, error) {
	if m.UniqueKey != "" {
		var id int64
		err := tx.StmtContext(ctx, s.st.prepared[qUniqueGet]).QueryRowContext(ctx, m.UniqueKey, storecore.StateMask(m.UniqueStates)).Scan(&id)
		switch {
		case err == nil:
			return store.Enqueued{ID: id, Duplicate: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return store.Enqueued{}, err
		}
	}
	if m.DedupID != "" {
		var id, at int64
		err := tx.StmtContext(ctx, s.st.prepared[qDedupGet]).QueryRowContext(ctx, m.Queue, m.DedupID).Scan(&id, &at)
		switch {
		case err == nil && now-at < s.opts.DedupWindow.Microseconds():
			return store.Enqueued{ID: id, Duplicate: true}, nil
		case err == nil:
			if _, err := tx.StmtContext(ctx, s.st.prepared[qDedupClear]).ExecContext(ctx, id); err != nil {
				return store.Enqueued{}, err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return store.Enqueued{}, err
		}
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	res, err := insert.ExecContext(ctx, m.Queue, nullable(m.Key), nullable(m.DedupID), nullable(m.ReplyTo), payload,
		m.MaxDeliveries, now, now+m.Delay.Microseconds(), nullable(m.Kind), m.Priority, nullBytes(m.Attributes), nullable(m.DeadLetterQueue),
		nullable(m.FairGroup), nullable(m.UniqueKey))
	if err != nil {
		return store.Enqueued{}, err
	}
	id, err := res.LastInsertId()
	return store.Enqueued{ID: id}, err
}

// Claim commits without syncing, unless its tokens would go over the
// fence ceiling (see durability.go).
func (s *backend) Claim(ctx context.Context, c store.Claim) ([]store.Delivery, error) {
	out, err := s.claim(ctx, c, levelNormal)
	if errors.Is(err, errOverCeiling) {
		out, err = s.claim(ctx, c, levelFull)
	}
	if err != nil {
		return nil, err
	}
	// RETURNING gives no order; the fencing tokens follow the claim order.
	slices.SortFunc(out, func(a, b store.Delivery) int { return cmp.Compare(a.FencingToken, b.FencingToken) })
	return out, nil
}

// claim claims in one transaction committed at level l.
func (s *backend) claim(ctx context.Context, c store.Claim, l level) ([]store.Delivery, error) {
	var out []store.Delivery
	err := s.writeAt(ctx, l, func(ctx context.Context, tx *sql.Tx, now int64) error {
		var base, ceiling int64
		if err := tx.StmtContext(ctx, s.st.prepared[qFenceGet]).QueryRowContext(ctx).Scan(&base, &ceiling); err != nil {
			return err
		}
		until := now + c.LeaseDuration.Microseconds()
		var err error
		if c.Runs {
			var ids []int64
			if ids, err = s.runs(ctx, tx, c, now); err != nil || len(ids) == 0 {
				return err
			}
			out, err = s.claimRows(ctx, tx, c, until, s.st.prepared[qClaimRun], base, c.WorkerID, until, c.Queue, now, idsJSON(ids), c.Independent)
		} else {
			out, err = s.claimRows(ctx, tx, c, until, s.st.prepared[qClaim], base, c.WorkerID, until, c.Queue, now, c.Max)
		}
		if err != nil || len(out) == 0 {
			return err
		}
		if _, err = tx.StmtContext(ctx, s.st.prepared[qFenceAdd]).ExecContext(ctx, len(out)); err != nil {
			return err
		}
		top := slices.MaxFunc(out, func(a, b store.Delivery) int { return cmp.Compare(a.FencingToken, b.FencingToken) }).FencingToken
		return s.checkCeiling(ctx, tx, l, top, ceiling)
	})
	return out, err
}

// runs returns the ids a claim with runs takes, in its order: the
// claimable messages in claim order, each keyed one followed by the rest
// of its run (the key's next waiting messages, in order, while they are
// visible and before the key's first processing message after it), up
// to c.Max in all.
func (s *backend) runs(ctx context.Context, tx *sql.Tx, c store.Claim, now int64) ([]int64, error) {
	rows, err := tx.StmtContext(ctx, s.st.prepared[qClaimable]).QueryContext(ctx, c.Queue, now, c.Max)
	if err != nil {
		return nil, err
	}
	type head struct {
		id, arrival int64
		key         sql.NullString
	}
	heads, err := sqlstate.Collect(rows, func(r *sql.Rows) (h head, err error) { return h, r.Scan(&h.id, &h.key, &h.arrival) })
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, c.Max)
	for _, h := range heads {
		if len(ids) == c.Max {
			break
		}
		ids = append(ids, h.id)
		if !h.key.Valid || len(ids) == c.Max {
			continue
		}
		run, err := s.runNext(ctx, tx, c.Queue, h.key.String, h.arrival, c.Max-len(ids), now)
		if err != nil {
			return nil, err
		}
		ids = append(ids, run...)
	}
	return ids, nil
}

// runNext returns the ids of at most n waiting messages of the key that
// come next after its head, at arrival in its line, in order, up to the
// first that is not visible at now or that comes after a processing one.
func (s *backend) runNext(ctx context.Context, tx *sql.Tx, queue, key string, arrival int64, n int, now int64) ([]int64, error) {
	rows, err := tx.StmtContext(ctx, s.st.prepared[qRunNext]).QueryContext(ctx, queue, key, n, arrival)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id, visible int64
		if err := rows.Scan(&id, &visible); err != nil {
			return nil, err
		}
		if visible > now {
			break
		}
		ids = append(ids, id)
	}
	return ids, rows.Close()
}

// claimRows runs a claiming statement, claim or claimRun, with args and
// reads the deliveries it returns, leased until until.
func (s *backend) claimRows(ctx context.Context, tx *sql.Tx, c store.Claim, until int64, stmt *sql.Stmt, args ...any) ([]store.Delivery, error) {
	rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		var key, reply, dedup, kind, source sql.NullString
		var enq, first int64
		if err := rows.Scan(&d.MessageID, &key, &d.Payload, &reply, &dedup, &d.Attempt, &d.MaxDeliveries, &enq, &d.FencingToken, &kind, &d.Priority,
			&d.Attributes, &first, &source); err != nil {
			return nil, err
		}
		d.Queue, d.Key, d.ReplyTo, d.DedupID, d.Kind, d.DeadLetterSource = c.Queue, key.String, reply.String, dedup.String, kind.String, source.String
		d.EnqueuedAt, d.LeaseExpires, d.FirstClaimedAt = fromMicros(enq), fromMicros(until), fromMicros(first)
		out = append(out, d)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return out, rows.Err()
}

func (s *backend) Extend(ctx context.Context, leases []store.Lease, extension time.Duration) (store.Extended, error) {
	var res store.Extended
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		until := now + extension.Microseconds()
		res = store.Extended{Expires: fromMicros(until)}
		if len(leases) == 0 {
			return nil
		}
		rows, err := tx.StmtContext(ctx, s.st.prepared[qExtend]).QueryContext(ctx, until, now, leasesJSON(leases, func(l store.Lease) store.Lease { return l }))
		if err != nil {
			return err
		}
		defer rows.Close()
		extended := make(map[store.Lease]bool, len(leases))
		for rows.Next() {
			var l store.Lease
			if err := rows.Scan(&l.MessageID, &l.FencingToken); err != nil {
				return err
			}
			extended[l] = true
		}
		if err := rows.Close(); err != nil {
			return err
		}
		res.Lost = storecore.LostLeases(leases, extended)
		if len(res.Lost) > 0 {
			res.Cancelled, err = s.cancelledOf(ctx, tx, res.Lost)
		}
		return err
	})
	if err != nil {
		return store.Extended{}, err
	}
	return res, nil
}

// cancelledOf returns those of leases whose message was cancelled under
// them.
func (s *backend) cancelledOf(ctx context.Context, tx *sql.Tx, leases []store.Lease) ([]store.Lease, error) {
	rows, err := tx.QueryContext(ctx, s.st.Text(qCancelledOf), leasesJSON(leases, func(l store.Lease) store.Lease { return l }))
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (l store.Lease, err error) { return l, r.Scan(&l.MessageID, &l.FencingToken) })
}

// leasesJSON encodes leases as a JSON array of [id, fencing token] pairs.
func leasesJSON[T any](items []T, lease func(T) store.Lease) string {
	b := make([]byte, 0, 2+len(items)*24)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		l := lease(it)
		b = append(b, '[')
		b = strconv.AppendInt(b, l.MessageID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, l.FencingToken, 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// deadIDs returns the ids to redrive or purge: the given ones, each checked
// to be a dead message of the queue, or all of the queue's dead messages.
func (s *backend) deadIDs(ctx context.Context, tx *sql.Tx, queue string, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		rows, err := tx.QueryContext(ctx, s.st.Text(qDeadIDs), queue)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	}
	for _, id := range ids {
		var one int
		err := tx.QueryRowContext(ctx, s.st.Text(qIsDead), id, queue).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: message %d is not a dead letter of queue %q", store.ErrNotFound, id, queue)
		}
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (s *backend) Redrive(ctx context.Context, queue string, ids []int64) (int, error) {
	return s.eachDead(ctx, queue, ids, s.st.Text(qRedrive))
}

func (s *backend) Purge(ctx context.Context, queue string, ids []int64) (int, error) {
	return s.eachDead(ctx, queue, ids, s.st.Text(qPurge))
}

// eachDead runs stmt (?1 the time, ?2 a message id) on each dead message
// that deadIDs selects, in one transaction, and returns how many.
func (s *backend) eachDead(ctx context.Context, queue string, ids []int64, stmt string) (int, error) {
	n := 0
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		ids, err := s.deadIDs(ctx, tx, queue, ids)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, stmt, now, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}

func (s *backend) Stats(ctx context.Context, queue string) (store.Stats, error) {
	st := store.Stats{Queue: queue}
	now := micros(s.clk.Now())
	var oldest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.st.Text(qStats), queue, now).Scan(&st.Pending, &st.Waiting, &st.Processing, &st.Completed, &st.Dead,
		&st.BlockedKeys, &oldest, &st.Paused, &st.Cancelled, &st.Delayed); err != nil {
		return st, err
	}
	if oldest.Valid {
		st.OldestPendingAge = time.Duration(now-oldest.Int64) * time.Microsecond
	}
	return st, nil
}

func (s *backend) AllStats(ctx context.Context) ([]store.Stats, error) {
	now := micros(s.clk.Now())
	rows, err := s.db.QueryContext(ctx, s.st.Text(qAllStats), now)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (st store.Stats, err error) {
		var oldest sql.NullInt64
		if err := r.Scan(&st.Queue, &st.Pending, &st.Waiting, &st.Processing, &st.Completed, &st.Dead, &st.BlockedKeys, &oldest,
			&st.Paused, &st.Cancelled, &st.Delayed); err != nil {
			return st, err
		}
		if oldest.Valid {
			st.OldestPendingAge = time.Duration(now-oldest.Int64) * time.Microsecond
		}
		return st, nil
	})
}

// List lists through the database.
func (s *backend) List(ctx context.Context, f store.ListFilter) ([]store.Info, error) {
	return s.list(ctx, s.db, f)
}

// ListTx is List inside the caller's transaction tx: it sees what tx has
// enqueued before it commits (a test's way to check an outbox).
func (s *Store) ListTx(ctx context.Context, tx *sql.Tx, f store.ListFilter) ([]store.Info, error) {
	f, err := s.core.CheckList(f)
	if err != nil {
		return nil, err
	}
	out, err := s.b.list(ctx, tx, f)
	return out, s.core.Failed("list", err)
}

// list lists through q, the database or a transaction.
func (s *backend) list(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, f store.ListFilter) ([]store.Info, error) {
	query, args := s.st.listSQL(f)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, scanRow)
}

// scanRow reads a row of a listing.
func scanRow(r *sql.Rows) (store.Info, error) { return scanInfo(r) }

func (s *backend) Get(ctx context.Context, id int64) (store.Info, error) {
	var history sql.NullString
	var snoozes int64
	in, err := scanInfo(s.db.QueryRowContext(ctx, s.st.Text(qGet), id), &history, &snoozes)
	in.Snoozes = int(snoozes)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Info{}, storecore.NoMessage("", id)
	}
	if err != nil {
		return store.Info{}, err
	}
	if history.Valid {
		if in.Errors, err = errorHistory(history.String); err != nil {
			return store.Info{}, fmt.Errorf("message %d: error history: %w", id, err)
		}
	}
	return in, nil
}

// errorHistory reads an error history as noteError writes it: times in
// microseconds, a worker null for none.
func errorHistory(text string) ([]store.AttemptError, error) {
	var entries []struct {
		Attempt int     `json:"attempt"`
		At      int64   `json:"at"`
		Worker  *string `json:"worker"`
		Error   string  `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &entries); err != nil {
		return nil, err
	}
	out := make([]store.AttemptError, len(entries))
	for i, e := range entries {
		out[i] = store.AttemptError{Attempt: e.Attempt, At: fromMicros(e.At), Error: e.Error}
		if e.Worker != nil {
			out[i].WorkerID = *e.Worker
		}
	}
	return out, nil
}

func (s *backend) BlockedKeys(ctx context.Context, queue, afterKey string, limit int) ([]store.BlockedKey, error) {
	rows, err := s.db.QueryContext(ctx, s.st.Text(qBlockedKeys), queue, afterKey, limit)
	if err != nil {
		return nil, err
	}
	return sqlstate.Collect(rows, func(r *sql.Rows) (k store.BlockedKey, err error) {
		k.Head, err = scanInfo(r, &k.Key, &k.Waiting)
		return k, err
	})
}

// scanInfo reads a message's columns, in the order list, get and
// blockedKeys select them, after the leading destinations (scanned first,
// as they are), from r: a row of a listing, of Get or of BlockedKeys. A
// row whose id is NULL, a head that a left join did not find, is the zero
// Info.
func scanInfo(r interface{ Scan(...any) error }, leading ...any) (store.Info, error) {
	var in store.Info
	var id, state, deliveries, max, fence, enq, vis, locked, finished, priority, first sql.NullInt64
	var queue, key, dedup, worker, lastErr, reason, kind, dlq, source sql.NullString
	dst := append(leading, &id, &queue, &state, &key, &dedup, &in.Payload, &deliveries, &max, &fence,
		&worker, &lastErr, &reason, &enq, &vis, &locked, &finished, &kind, &priority, &in.Attributes, &first, &dlq, &source)
	if err := r.Scan(dst...); err != nil {
		return store.Info{}, err
	}
	if !id.Valid {
		return store.Info{}, nil
	}
	in.ID, in.Queue, in.State = id.Int64, queue.String, store.State(state.Int64)
	in.Key, in.DedupID, in.WorkerID, in.LastError, in.DeadReason = key.String, dedup.String, worker.String, lastErr.String, store.DeadReason(reason.String)
	in.Kind, in.Priority = kind.String, int(priority.Int64)
	in.DeadLetterQueue, in.DeadLetterSource = dlq.String, source.String
	in.Deliveries, in.MaxDeliveries, in.FencingToken = int(deliveries.Int64), int(max.Int64), fence.Int64
	in.EnqueuedAt, in.VisibleAt = fromMicros(enq.Int64), fromMicros(vis.Int64)
	if in.State == store.Processing {
		in.LeaseExpires = nullTime(locked)
	}
	in.FinishedAt, in.FirstClaimedAt = nullTime(finished), nullTime(first)
	return in, nil
}

func (s *backend) Prune(ctx context.Context, p store.Prune) (int, error) {
	n := 0
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		n = 0
		rows, err := tx.QueryContext(ctx, s.st.InState(qPrune, p.State),
			now-p.OlderThan.Microseconds(), now-s.opts.DedupWindow.Microseconds(), nullable(p.Queue), p.Limit)
		if err != nil {
			return err
		}
		perQueue := map[string]int{}
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				rows.Close()
				return err
			}
			perQueue[q]++
			n++
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if p.State != store.Completed {
			return nil
		}
		for q, k := range perQueue {
			if _, err := tx.ExecContext(ctx, s.st.Text(qUncount), k, q); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
