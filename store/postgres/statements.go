package postgres

import (
	_ "embed"

	"github.com/leasehold/leasehold/internal/sqlstate"
)

// queriesSQL holds every statement the store runs, by name; see its header
// for what is written in when the store opens.
//
//go:embed queries.sql
var queriesSQL string

// query names a statement of queries.sql.
type query int

const (
	qLockKeys query = iota
	qNotify
	qBegin
	qCommit
	qIndexScans
	qIsolation
	qInsertBulk
	qInsertOne
	qInsertPlaced
	qUniqueGet
	qDedupGet
	qDedupClear
	qClaim
	qExtend
	qComplete
	qCompleteAgain
	qCancelledOf
	qKeysOf
	qCancelRows
	qCancel
	qPromote
	qCurrent
	qRetry
	qTakeBackDelivery
	qKill
	qClaimRuns
	qCompleteLate
	qRunning
	qGiven
	qHold
	qExpired
	qDeadRows
	qRedrive
	qHasten
	qSnoozed
	qMovablePending
	qMovableDead
	qMovableLock
	qTransfer
	qRecorded
	qPurge
	qStats
	qAllStats
	qCount
	qPrune
	qDeleteQueue
	qPurgeQueue
	qCreateQueue
	qQueueRecord
	qLockQueueRecord
	qSetQueueAttributes
	qHoldMaintainer
	qReleaseMaintainer
	qKeepSecret
	qSecret
	qCheckWrite
	qPause
	qResume
	qQueues
	qQueuesAfter
	qQueuesBefore
	qList
	qListBefore
	qGet
	qBlockedKeys
	qThroughput
	qPruneThroughput
	qScheduled
	nQueries
)

// queryNames are the statements' names in queries.sql.
var queryNames = [nQueries]string{
	qLockKeys:           "lockKeys",
	qNotify:             "notify",
	qBegin:              "begin",
	qCommit:             "commit",
	qIndexScans:         "indexScans",
	qIsolation:          "isolation",
	qInsertBulk:         "insertBulk",
	qInsertOne:          "insertOne",
	qInsertPlaced:       "insertPlaced",
	qUniqueGet:          "uniqueGet",
	qDedupGet:           "dedupGet",
	qDedupClear:         "dedupClear",
	qClaim:              "claim",
	qExtend:             "extend",
	qComplete:           "complete",
	qCompleteAgain:      "completeAgain",
	qCancelledOf:        "cancelledOf",
	qKeysOf:             "keysOf",
	qCancelRows:         "cancelRows",
	qCancel:             "cancel",
	qPromote:            "promote",
	qCurrent:            "current",
	qRetry:              "retry",
	qTakeBackDelivery:   "takeBackDelivery",
	qKill:               "kill",
	qClaimRuns:          "claimRuns",
	qCompleteLate:       "completeLate",
	qRunning:            "running",
	qGiven:              "given",
	qHold:               "hold",
	qExpired:            "expired",
	qDeadRows:           "deadRows",
	qRedrive:            "redrive",
	qHasten:             "hasten",
	qSnoozed:            "snoozed",
	qMovablePending:     "movablePending",
	qMovableDead:        "movableDead",
	qMovableLock:        "movableLock",
	qTransfer:           "transfer",
	qRecorded:           "recorded",
	qPurge:              "purge",
	qStats:              "stats",
	qAllStats:           "allStats",
	qCount:              "count",
	qPrune:              "prune",
	qDeleteQueue:        "deleteQueue",
	qPurgeQueue:         "purgeQueue",
	qCreateQueue:        "createQueue",
	qQueueRecord:        "queueRecord",
	qLockQueueRecord:    "lockQueueRecord",
	qSetQueueAttributes: "setQueueAttributes",
	qHoldMaintainer:     "holdMaintainer",
	qReleaseMaintainer:  "releaseMaintainer",
	qKeepSecret:         "keepSecret",
	qSecret:             "secret",
	qCheckWrite:         "checkWrite",
	qPause:              "pause",
	qResume:             "resume",
	qQueues:             "queues",
	qQueuesAfter:        "queuesAfter",
	qQueuesBefore:       "queuesBefore",
	qList:               "list",
	qListBefore:         "listBefore",
	qGet:                "get",
	qBlockedKeys:        "blockedKeys",
	qThroughput:         "throughput",
	qPruneThroughput:    "pruneThroughput",
	qScheduled:          "scheduled",
}

// loadQueries reads queries.sql with the schema and the states' codes
// written in.
func loadQueries(schema string) (*sqlstate.Statements[query], error) {
	return sqlstate.Load[query](queriesSQL, queryNames[:], func(sql string) string { return expand(sql, schema) })
}
