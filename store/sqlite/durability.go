package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// How hard commits reach the disk.
//
// The rule: every transaction's commit syncs the WAL (synchronous=FULL,
// unless Config.Synchronous says "normal"), except a claim's, which
// commits without syncing (NORMAL) while the fencing tokens it hands out
// are at or under the fence ceiling, a number that only commits that sync
// raise (migration 20). A claim that would go over it raises it, by
// fenceReserve more than it needs, in a commit that syncs. A store that
// opens the file for writing first moves the fence (the last token handed
// out) up to the ceiling, in a commit that syncs.
//
// Why an acknowledged claim may be lost, and why that is safe:
//
//  1. Only a power failure or a crash of the operating system can undo a
//     commit that did not sync: once a commit returns, its frames are in
//     the operating system's hands, and a process killed (kill -9) takes
//     none of them along. Such a failure ends every process on the host,
//     and the file is shared by processes of one host only: every holder
//     of a lease in a worker of this library dies with it.
//  2. It can only undo a suffix of the commits, the ones after the last
//     that synced. Each WAL frame is checksummed over the frames before
//     it, and recovery keeps the longest run of valid frames ending in a
//     commit, so a later commit never survives an earlier one; and a
//     commit that syncs syncs the WAL file whole (fdatasync is per file,
//     whichever process or connection wrote the frames), so every commit
//     before it, synced or not, is durable with it. The database after
//     recovery is the database as it was after some commit: consistent,
//     as if the claims undone had never run, and with them anything that
//     built on them (a completion of a claimed message comes after its
//     claim, and survives only with it). An enqueue, a completion, any
//     other change is acknowledged only after a commit that syncs.
//  3. A claim undone is then a lease that ended early, at the failure:
//     its messages are claimable again, in their places, their groups and
//     keys unlocked. Its delivery goes uncounted (the message keeps the
//     deliveries and receive count of before the claim), and a holder on
//     another host (a client of the SQS API, which outlives the server's
//     host) may see its messages delivered again before the visibility
//     timeout it was given: at-least-once delivery, as after a timeout.
//  4. What a claim hands out that outlives the host is its fencing tokens:
//     in the systems a handler wrote to, in the receipt handles the SQS
//     API gave out. A token must never be handed out twice, or a stale
//     holder would pass for the new one (its delete would delete the new
//     delivery). Every token a claim handed out was at or under the
//     ceiling it read in its transaction, and that ceiling was written by
//     a commit that synced before the claim's transaction began (the
//     write lock is held until the sync is done), so the ceiling that
//     survives the failure is at least every token handed out before it.
//     The fence is moved up to that ceiling when a store opens the file,
//     and no claim runs after the failure before a store opens it, for
//     every process died; so every token handed out after it is higher
//     than any handed out before.
//  5. A database written by an older leasehold, which claims with a
//     synced commit and does not move the fence at open, cannot share the
//     file: the schema version of migration 20 refuses it.
//
// With Config.Synchronous "normal" every commit goes without syncing, and
// a power failure may lose acknowledged enqueues and completions too; the
// ceiling is still raised and the fence moved in commits that sync, so
// that tokens are never handed out twice there either.

// fenceReserve is how far past the tokens it hands out a claim raises the
// ceiling, so that a commit that syncs for the ceiling is rare. Each
// opening of the file skips what is left of it: 2^63 tokens last
// 8.8 * 10^12 openings.
const fenceReserve = 1 << 20

// level is a synchronous setting of SQLite.
type level string

const (
	levelFull   level = "full"
	levelNormal level = "normal"
)

// errOverCeiling ends a claim that commits without syncing and would hand
// out a token over the ceiling: it is run again with a commit that syncs.
var errOverCeiling = errors.New("fencing tokens over the ceiling")

// writeAt is write, committed at level l. When l is not the store's own,
// the transaction runs on the connection set to l before it, and set back
// after: SQLite reads the setting when it commits, and does not let it
// change inside a transaction. A connection whose setting could not be set
// back is closed, so that no later write commits at l.
func (s *backend) writeAt(ctx context.Context, l level, fn func(ctx context.Context, tx *sql.Tx, now int64) error) error {
	if l == s.sync {
		return s.write(ctx, fn)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = "+string(l)); err != nil {
		return fmt.Errorf("synchronous %s: %w", l, err)
	}
	err = s.txOn(ctx, conn, fn)
	if _, back := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = "+string(s.sync)); back != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discards the connection
		return errors.Join(err, fmt.Errorf("synchronous %s again: %w", s.sync, back))
	}
	return err
}

// floorFence moves the fence up to its ceiling, in a commit that syncs
// (see the rule above); an opening store calls it before any claim.
func (s *backend) floorFence(ctx context.Context) error {
	return s.writeAt(ctx, levelFull, func(ctx context.Context, tx *sql.Tx, _ int64) error {
		_, err := tx.ExecContext(ctx, s.st.Text(qFenceFloor))
		return err
	})
}

// checkCeiling keeps a claim's tokens, the last of which is top, under the
// ceiling read in its transaction: a claim committed at l without syncing
// must not go over it (errOverCeiling), one that syncs raises it.
func (s *backend) checkCeiling(ctx context.Context, tx *sql.Tx, l level, top, ceiling int64) error {
	switch {
	case top <= ceiling:
		return nil
	case l != levelFull:
		return errOverCeiling
	}
	_, err := tx.ExecContext(ctx, s.st.Text(qFenceRaise), top+fenceReserve)
	return err
}
