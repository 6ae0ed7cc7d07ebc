// Package worklease runs the work of each domain one unit at a time, in
// order: a lease with a fencing token on the one offset in flight, a FIFO
// backlog of the offsets that arrived meanwhile, and a record of the
// offsets that are finished, so that none runs twice.
//
// # When to use it, and when message keys
//
// worklease is for an orchestrator that already knows its offsets: a
// consumer of an ordered log (a partition, a change stream) or a
// per-tenant pipeline whose steps are numbered. The source keeps the work
// and its order, durably; after a restart the orchestrator reads it again
// from the offsets it committed. What it needs beside the source, in
// memory, is what worklease holds: each domain's one offset in flight,
// under a token that a stale holder cannot use; the offsets that arrived
// meanwhile, in order; and the finished ones, so that a source that
// delivers at least once runs none twice. When to retry, and what to do
// with an offset given up on, stay with the caller (Example_orderedLog).
//
// When the work itself must be durable, handed over by producers and
// shared by workers in several processes, with retries, dead letters and
// a reaper for workers that die, enqueue messages with a key instead
// (store.NewMessage.Key): the store runs each key's messages one at a time
// in enqueue order, in its database. Copying an ordered log into the queue
// only for that order would store every unit twice and order it by
// enqueue rather than by the log's own offsets.
//
// Neither the store's key lines nor the memory store is built on
// worklease. The SQL backends keep a key's line in their tables, changed in
// the transaction that claims or finishes a message and shared by every
// process on the database, which an in-memory Leases cannot be. The memory
// store passes the same conformance suite, which asks for what worklease
// rules out on purpose: a lease that expires, is reaped and is claimed
// again under a new token; a dead message redriven back into its key's
// line, in id order; a waiting message cancelled out of the middle of a
// line; finished messages forgotten after their retention; and a delivery
// limit per message.
//
// # The contract
//
// A domain (a key, a partition, an account) is idle or has exactly one
// offset in flight. [Leases.TryAcquire] of an offset on an idle domain
// acquires it and returns a new token; while another offset is in flight,
// the offset joins the tail of the backlog instead (once: duplicates are
// dropped) and Enqueued is returned. The backlog drains only through
// TryAcquire of its head: on an idle domain with a backlog, any other offset
// is a caller bug, reported as a [*BacklogOrderingError] that names the
// head.
//
// [Leases.Succeed] and [Leases.Fail] must present the lease's token; a wrong
// or stale token is an error wrapping [ErrTokenMismatch], a domain with no
// lease one wrapping [ErrLeaseNotFound]. Succeed makes the offset processed
// and clears the lease. Fail keeps the lease, with its token and
// AcquiredAt, and counts a retry, until the lease has been retried
// [Config.MaxRetries] times; the next Fail gives the offset up for good and
// clears the lease.
//
// Neither hands the domain to anyone. When a lease ends, the result hints at
// the backlog head (NextHint, GiveUpNextHint), still in the backlog, and the
// orchestrator, the caller's code, decides when to TryAcquire it. Likewise
// the package keeps no timers: when to retry a failed offset, and how long
// to back off, is computed outside from [Lease.AcquiredAt] and
// [Lease.RetryCount]. There is no sleeping state: a domain is in flight or
// idle.
//
// Offsets that succeeded and offsets given up on are terminal, and are kept
// apart: TryAcquire of one returns AlreadyProcessed or AlreadyFailed and
// changes nothing, whether the domain is idle or busy. A call that returns
// an error changes nothing either.
//
// # Invariants, per domain
//
//   - At most one lease, on one offset.
//   - The leased offset is neither terminal nor in the backlog; the backlog
//     holds no terminal offset and no duplicate.
//   - The backlog is first in, first out, and loses its head only to the
//     TryAcquire of that head.
//   - A terminal offset is never queued or acquired again.
//   - Succeed and Fail take effect only with the active lease's token.
//
// # Concurrency and memory
//
// A Leases is safe for concurrent use. Each domain has its own lock, in a
// record created once and never replaced; calls on different domains share
// no lock. Nothing is called back, and no I/O is done, with a lock held:
// tokens ([Config.NewToken]) and the time ([Config.Clock]) are made before
// the lock is taken.
//
// Terminal offsets are stored as sorted ranges of consecutive offsets, so
// that the usual case, offsets that mostly increase, costs a few bytes per
// domain however many offsets it has run; sparse offsets cost a range each.
// Domains are never forgotten: a Leases grows with the number of domains it
// has seen.
package worklease
