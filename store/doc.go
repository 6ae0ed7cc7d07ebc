// Package store defines leasehold's durable queue: messages claimed under
// fenced leases. Backends (store/memory, store/sqlite, store/postgres)
// implement [Store]; package storetest holds the conformance suite that every
// backend runs. Programs normally reach a store through the root package's
// Client, which takes one of the backends.
//
// # Leases and fencing
//
// Every claim of a message mints a new lease: the message's id plus a fencing
// token that is unique per claim and strictly increases across successive
// claims of the same message. Every mutation of a claimed message (extend,
// complete, fail, nack) names its lease and succeeds only while that lease is
// current: the message is processing under that fencing token and its lease
// has not expired. Anything else is [ErrLeaseLost] and changes nothing.
//
// # Per-key order
//
// Messages with the same key run one at a time in enqueue order. Only a
// key's oldest unfinished message is ever claimable; the others wait in
// state [Waiting] and the next one becomes pending when its predecessor
// completes or is dead-lettered. A head that fails and will be retried keeps
// its key blocked.
//
// # Time
//
// Each store has one time authority. The memory and SQLite backends use the
// clock they are given (the system clock by default; SQLite's writers share
// one host). The PostgreSQL backend uses the database's now().
package store
