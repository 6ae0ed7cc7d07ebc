// Package lifecycle runs loops and stops them well: the Runnable
// contract, a Group that runs several loops as one, a Coordinator that turns
// SIGTERM and SIGINT into a graceful shutdown and a second signal into a
// hard stop, health handlers, and WaitUntil.
//
// Signal handling is opt-in: nothing here touches signals until
// Coordinator.Listen is called. The leasehold command calls it.
package lifecycle
