// Package storetest is the conformance suite for store.Store backends. Every
// backend runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clk clock.Clock) store.Store { ... })
//	}
//
// Each test gets a new, empty store from the factory, with a fake clock as
// its time authority, and may run in parallel with the others. Run, in
// run.go, lists every check by topic; each topic has its file.
package storetest

import (
	"testing"

	"github.com/leasehold/leasehold/clock"
	"github.com/leasehold/leasehold/store"
)

// Factory returns a new, empty store whose time authority is clk, and
// arranges (with t.Cleanup) for it to be closed and removed.
type Factory func(t *testing.T, clk clock.Clock) store.Store

// Option adjusts what the suite expects of a backend.
type Option func(*options)

type options struct {
	claimsSkipLocked bool
}

// ClaimsSkipLocked tells the suite that a claim passes over a message
// another operation holds locked at that moment, as PostgreSQL's FOR UPDATE
// SKIP LOCKED does, even when that operation then leaves the message as it
// was (a lease check that fails still locks the row until its transaction
// ends). The linearizability test then accepts an empty claim of a pending
// message, but only from a claim that ran concurrently with another
// operation on the message.
func ClaimsSkipLocked() Option { return func(o *options) { o.claimsSkipLocked = true } }

// Run runs the whole suite on the backend that f opens, each check a
// subtest, named as below, on a store of its own. To pass, a backend must:
//
//   - open a new, empty store on each call of f, from parallel subtests at
//     once, and close and remove it in t.Cleanup;
//   - take every time it records or compares (visibility, lease expiry,
//     the dedup window, retention, the ages in Stats) from clk, a fake
//     clock the checks move by hand, never from the system clock;
//   - keep each promise the store package documents: fenced leases that a
//     stale holder cannot use, deliveries counted at claim, dead letters,
//     one message of a key at a time in enqueue order, dedup within its
//     window, queues, pauses and records, and the errors it names
//     (ErrInvalid, ErrLeaseLost, ErrNotFound, ErrClosed), matched with
//     errors.Is, where a refused call changes nothing;
//   - stay correct under concurrent callers: every history of claims,
//     extensions, completions, releases and reaps must be linearizable
//     against one fenced lease per message (with ClaimsSkipLocked when a
//     claim may pass over a row another transaction holds);
//   - close a queue's Wakeup channel on an enqueue in the same process,
//     without any clock time passing.
//
// A backend with a schema of its own also runs CheckUpgraded on a database
// the previous schema version wrote; a backend shared by processes runs
// CheckSecretShared, and CheckReadOnly on a database that refuses writes.
func Run(t *testing.T, f Factory, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		// Enqueue, claim, complete (claim.go, priority.go, attributes.go).
		{"EnqueueClaimComplete", testEnqueueClaimComplete},
		{"EnqueueIsAtomic", testEnqueueIsAtomic},
		{"DelayAndVisibility", testDelayAndVisibility},
		{"ClaimOrderAndBatchLimit", testClaimOrderAndBatchLimit},
		{"Priority", testPriority},
		{"DeliveriesCountedAtClaim", testDeliveriesCountedAtClaim},
		{"Kind", testKind},
		{"MessageAttributes", testMessageAttributes},
		{"AttributesCountTowardThePayloadLimit", testAttributesCountTowardThePayloadLimit},
		{"FirstClaimedAt", testFirstClaimedAt},
		{"WakeupOnEnqueue", testWakeupOnEnqueue},
		{"CompleteBatchPerMessage", testCompleteBatchPerMessage},
		{"CompleteWithReply", testCompleteWithReply},
		{"ConcurrentReceivers", testConcurrentReceivers},

		// Leases and fencing (lease.go, linearizability.go, maintainer.go,
		// late.go).
		{"Fencing", testFencing},
		{"ExpiredLeaseIsLost", testExpiredLeaseIsLost},
		{"FencingTokensIncrease", testFencingTokensIncrease},
		{"BatchExtendReportsLost", testBatchExtendReportsLost},
		{"Linearizable", func(t *testing.T, f Factory) { testLinearizable(t, f, o) }},
		{"Maintainer", testMaintainer},
		{"LateCompletion", testLateCompletion},
		{"LateCompletionRepeated", testLateCompletionRepeated},
		{"LateCompletionRefused", testLateCompletionRefused},
		{"LateCompletionOfAHead", testLateCompletionOfAHead},
		{"LateRelease", testLateRelease},

		// Failures, releases and cancels (failure.go, cancel.go).
		{"FailRetriesThenDeadLetters", testFailRetriesThenDeadLetters},
		{"FailWithReply", testFailWithReply},
		{"PermanentFailure", testPermanentFailure},
		{"ReleaseAndUncount", testReleaseAndUncount},
		{"SnoozesCounted", testSnoozesCounted},
		{"CountedReleaseUsesTheBudget", testCountedReleaseUsesTheBudget},
		{"AnyErrorTextIsRecorded", testAnyErrorTextIsRecorded},
		{"Cancel", testCancel},
		// Rerun and delete by id, for admin tools (rerun.go).
		{"Rerun", testRerun},
		{"RerunKey", testRerunKey},
		{"Delete", testDelete},

		// Dead letters and the reaper (deadletters.go, reaper.go).
		{"RedriveAndPurge", testRedriveAndPurge},
		{"Reaper", testReaper},
		{"ConcurrentReapers", testConcurrentReapers},
		{"ReaperDeadLettersExhausted", testReaperDeadLettersExhausted},

		// Dead-letter queues and moves between queues
		// (deadletterqueues.go).
		{"DeadLetterQueueOnFail", testDeadLetterQueueOnFail},
		{"DeadLetterQueueOfFailure", testDeadLetterQueueOfFailure},
		{"UncountedFailure", testUncountedFailure},
		{"DeadLetterQueueOnReap", testDeadLetterQueueOnReap},
		{"DeadLetterQueueOfARun", testDeadLetterQueueOfARun},
		{"DeadLetterQueueOfAReapedRun", testDeadLetterQueueOfAReapedRun},
		{"MovedMessageTakesItsPlace", testMovedMessageTakesItsPlace},
		{"MoveIntoDeletedQueue", testMoveIntoDeletedQueue},
		{"LateCompletionAfterMove", testLateCompletionAfterMove},
		{"Move", testMove},

		// Keys: one message of a key at a time, in enqueue order (keys.go);
		// dedup ids (dedup.go).
		{"KeyFIFO", testKeyFIFO},
		{"KeyRetryingHeadBlocks", testKeyRetryingHeadBlocks},
		{"KeyDeadHeadUnblocks", testKeyDeadHeadUnblocks},
		{"KeyRedriveWaitsBehindHead", testKeyRedriveWaitsBehindHead},
		{"Dedup", testDedup},
		{"UniqueKeys", testUniqueKeys},
		{"UniqueKeysConcurrently", testUniqueKeysConcurrently},

		// Runs: a claim that takes a key's next messages along (runs.go).
		{"RunClaim", testRunClaim},
		{"RunLimits", testRunLimits},
		{"RunFailBringsRestBack", testRunFailBringsRestBack},
		{"RunReleaseAndReap", testRunReleaseAndReap},
		{"RunPoisonHead", testRunPoisonHead},
		{"RunDeadOrCancelledGoesOn", testRunDeadOrCancelledGoesOn},
		{"RunBlockedKeys", testRunBlockedKeys},
		{"RunIndependentRelease", testRunIndependentRelease},
		{"RunIndependentReap", testRunIndependentReap},

		// Error histories (errorhistory.go).
		{"ErrorHistory", testErrorHistory},

		// Fairness groups: a tenant's backlog takes turns (fairgroups.go).
		{"FairGroups", testFairGroups},

		// Retention: pruning finished messages (retention.go).
		{"Retention", testRetention},
		{"PruneDeadAndCancelled", testPruneDeadAndCancelled},

		// Queues: the list, pauses, records, purges, deletes (queues.go,
		// pause.go, queueinfo.go).
		{"Queues", testQueues},
		{"AllStats", testAllStats},
		{"QueuePage", testQueuePage},
		{"DeleteQueue", testDeleteQueue},
		{"PauseAndResume", testPauseAndResume},
		{"CreateQueue", testCreateQueue},
		{"CreateQueueConcurrently", testCreateQueueConcurrently},
		{"QueueRecordAndPause", testQueueRecordAndPause},
		{"SetQueueAttributes", testSetQueueAttributes},
		{"PurgeQueue", testPurgeQueue},
		{"DeleteQueueRecord", testDeleteQueueRecord},
		{"BadQueueAttributesChangeNothing", testBadQueueAttributesChangeNothing},

		// Stats and browsing (browse.go, attributes.go).
		{"StatsAndList", testStatsAndList},
		{"StatsDelayed", testStatsDelayed},
		{"ListFilters", testListFilters},
		{"ListFiltersBadInput", testListFiltersBadInput},
		{"Get", testGet},
		{"BlockedKeys", testBlockedKeys},
		{"QueuesOfEveryState", testQueuesOfEveryState},
		{"Scheduled", testScheduled},
		{"Throughput", testThroughput},

		// What a store refuses: bad input, unknown leases, calls after
		// Close (refused.go).
		{"BadInputChangesNothing", testBadInputChangesNothing},
		{"PingAndClose", testPingAndClose},

		// What servers of a database share: secrets, and the proof that
		// the database takes writes (secrets.go).
		{"ServerSecret", testServerSecret},
		{"CheckWrite", testCheckWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, f) })
	}
}
