// Package clock is leasehold's only door to time.
//
// Every time-dependent piece of leasehold (leases, heartbeats, the reaper,
// backoff, timeouts) takes a [Clock] instead of calling the time package, so
// tests run on controlled time and never sleep. A nil Clock in any
// configuration means [System].
//
// The interfaces are small so that a component can ask for only what it
// uses: [WallClock] for timestamps, [MonotonicClock] for intervals,
// [Sleeper] for waiting, [Timers] for timers, tickers and callbacks.
//
// # Testing time-dependent code
//
// Two tools fit different tests:
//
//   - The fake clock in package clocktest suits code that a test drives step
//     by step from one goroutine: a lease table's expiry, a backoff
//     schedule, a store whose idea of "now" must be controlled. The test
//     calls Advance and checks the result; Sleep advances the fake time
//     instead of blocking. When a background goroutine waits on the fake
//     clock, the test calls BlockUntil to wait until it has registered its
//     timer, then Advance, so the two never race.
//
//   - testing/synctest suits background loops (the lease keeper, the reaper,
//     the watchdog) that run in their own goroutines. Run the test inside
//     synctest.Test and give the components the [System] clock: time then
//     stands still while any goroutine in the bubble works and jumps ahead
//     when all of them wait, and synctest.Wait tells the test when they do.
//     Keep sockets and databases out of a bubble: a goroutine blocked on I/O
//     or a mutex is not durably blocked, so time would stop.
package clock
