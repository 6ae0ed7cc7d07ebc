package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/store"
)

// queriesSQL holds every statement the store runs, by name; see its header
// for what is written in when the store opens.
//
//go:embed queries.sql
var queriesSQL string

// query names a statement of queries.sql.
type query int

// The hot path's statements, prepared once on the store's single
// connection. They come first, so that prepared[q] of any other statement
// is an index out of range, which the compiler reports.
const (
	qInsert query = iota
	qDedupGet
	qDedupClear
	qUniqueGet
	qFenceGet
	qFenceAdd
	qClaim
	qExtend
	qComplete
	qCurrent
	qPromote
	qClaimable
	qRunNext
	qClaimRun
	qTally
	nPrepared
)

// The statements run as they are.
const (
	qCancelledOf query = nPrepared + iota
	qFenceRaise
	qFenceFloor
	qMessageOf
	qCancel
	qKill
	qRetry
	qTakeBackDelivery
	qNoteError
	qExpired
	qCompleteLate
	qCompletedUnder
	qRunning
	qGiven
	qHold
	qDeadIDs
	qIsDead
	qRedrive
	qHasten
	qSnoozed
	qMovablePending
	qMovableDead
	qTransfer
	qArrivals
	qRecorded
	qPurge
	qDeleteMessages
	qStats
	qAllStats
	qPrune
	qUncount
	qDeleteQueue
	qForgetCounts
	qForgetQueue
	qCreateQueue
	qQueueRecord
	qSetQueueAttributes
	qHoldMaintainer
	qMaintainer
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
	qGet
	qBlockedKeys
	qThroughput
	qPruneThroughput
	qScheduledPriorities
	qScheduled
	nQueries
)

// queryNames are the statements' names in queries.sql.
var queryNames = [nQueries]string{
	qInsert:              "insert",
	qDedupGet:            "dedupGet",
	qDedupClear:          "dedupClear",
	qUniqueGet:           "uniqueGet",
	qFenceGet:            "fenceGet",
	qFenceAdd:            "fenceAdd",
	qFenceRaise:          "fenceRaise",
	qFenceFloor:          "fenceFloor",
	qClaim:               "claim",
	qExtend:              "extend",
	qComplete:            "complete",
	qCurrent:             "current",
	qPromote:             "promote",
	qClaimable:           "claimable",
	qRunNext:             "runNext",
	qClaimRun:            "claimRun",
	qCompleteLate:        "completeLate",
	qCompletedUnder:      "completedUnder",
	qRunning:             "running",
	qGiven:               "given",
	qHold:                "hold",
	qCancelledOf:         "cancelledOf",
	qMessageOf:           "messageOf",
	qCancel:              "cancel",
	qKill:                "kill",
	qRetry:               "retry",
	qTakeBackDelivery:    "takeBackDelivery",
	qNoteError:           "noteError",
	qExpired:             "expired",
	qDeadIDs:             "deadIDs",
	qIsDead:              "isDead",
	qRedrive:             "redrive",
	qHasten:              "hasten",
	qSnoozed:             "snoozed",
	qMovablePending:      "movablePending",
	qMovableDead:         "movableDead",
	qTransfer:            "transfer",
	qArrivals:            "arrivals",
	qRecorded:            "recorded",
	qPurge:               "purge",
	qDeleteMessages:      "deleteMessages",
	qStats:               "stats",
	qAllStats:            "allStats",
	qPrune:               "prune",
	qUncount:             "uncount",
	qDeleteQueue:         "deleteQueue",
	qForgetCounts:        "forgetCounts",
	qForgetQueue:         "forgetQueue",
	qCreateQueue:         "createQueue",
	qQueueRecord:         "queueRecord",
	qSetQueueAttributes:  "setQueueAttributes",
	qHoldMaintainer:      "holdMaintainer",
	qMaintainer:          "maintainer",
	qReleaseMaintainer:   "releaseMaintainer",
	qKeepSecret:          "keepSecret",
	qSecret:              "secret",
	qCheckWrite:          "checkWrite",
	qPause:               "pause",
	qResume:              "resume",
	qQueues:              "queues",
	qQueuesAfter:         "queuesAfter",
	qQueuesBefore:        "queuesBefore",
	qList:                "list",
	qGet:                 "get",
	qBlockedKeys:         "blockedKeys",
	qTally:               "tally",
	qThroughput:          "throughput",
	qPruneThroughput:     "pruneThroughput",
	qScheduledPriorities: "scheduledPriorities",
	qScheduled:           "scheduled",
}

// statements are the store's statements, with the states' codes written
// in, and the hot path's prepared.
type statements struct {
	*sqlstate.Statements[query]
	prepared [nPrepared]*sql.Stmt
}

func (st *statements) prepare(ctx context.Context, db *sql.DB) error {
	var err error
	if st.Statements, err = sqlstate.Load[query](queriesSQL, queryNames[:], nil); err != nil {
		return fmt.Errorf("queries.sql: %w", err)
	}
	for q := range nPrepared {
		s, err := db.PrepareContext(ctx, st.Text(q))
		if err != nil {
			st.close()
			return fmt.Errorf("prepare %s: %w", queryNames[q], err)
		}
		st.prepared[q] = s
	}
	return nil
}

func (st *statements) close() {
	for _, s := range st.prepared {
		if s != nil {
			s.Close()
		}
	}
}

// listIndex is the index each listing reads, by state: without a key or
// a kind, the state's own (or for the processing messages, which have
// none by queue, their expiry's, which holds live rows only); with a key,
// the key's: leasehold_key_head holds a key's head, pending or processing,
// leasehold_finished_key its finished messages. Completed messages of a
// kind have an index of their own (migration 10 explains each choice).
var listIndex = [store.States]struct{ all, key, kind string }{
	store.Pending:    {"leasehold_ready", "leasehold_key_head", "leasehold_ready"},
	store.Waiting:    {"leasehold_waiting", "leasehold_waiting", "leasehold_waiting"},
	store.Processing: {"leasehold_processing", "leasehold_key_head", "leasehold_processing"},
	store.Completed:  {"leasehold_completed_queue", "leasehold_finished_key", "leasehold_completed_kind"},
	store.Dead:       {"leasehold_dead", "leasehold_finished_key", "leasehold_dead"},
	store.Cancelled:  {"leasehold_cancelled", "leasehold_finished_key", "leasehold_cancelled"},
}

// keyIndexTerm is, by state, the term of the WHERE clause of the key's
// index that a listing with a key repeats: SQLite uses a partial index only
// for a query whose WHERE clause holds each term of the index's.
var keyIndexTerm = [store.States]string{
	store.Pending:    sqlstate.Expand(` AND state IN ({pending}, {processing})`),
	store.Processing: sqlstate.Expand(` AND state IN ({pending}, {processing})`),
	store.Completed:  sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
	store.Dead:       sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
	store.Cancelled:  sqlstate.Expand(` AND state IN ({completed}, {dead}, {cancelled})`),
}

// listSQL returns the statement that lists f and its arguments: list,
// reading the index f needs, with the filters that are set and the page's
// end and order.
func (st *statements) listSQL(f store.ListFilter) (string, []any) {
	var b strings.Builder
	index := listIndex[f.State].all
	switch {
	case f.Key != "":
		index = listIndex[f.State].key
	case f.Kind != "":
		index = listIndex[f.State].kind
	}
	b.WriteString(strings.Replace(st.InState(qList, f.State), "{index}", index, 1))
	args := []any{f.Queue, f.AfterID}
	if f.Key != "" {
		b.WriteString(" AND key = ?" + keyIndexTerm[f.State])
		args = append(args, f.Key)
	}
	if f.Kind != "" {
		b.WriteString(" AND kind = ?")
		args = append(args, f.Kind)
	}
	if f.Reason != "" {
		b.WriteString(" AND dead_reason = ?")
		args = append(args, string(f.Reason))
	}
	if f.BeforeID > 0 {
		b.WriteString(" AND id < ? ORDER BY id DESC LIMIT ?")
		args = append(args, f.BeforeID, f.Limit)
	} else {
		b.WriteString(" ORDER BY id LIMIT ?")
		args = append(args, f.Limit)
	}
	return b.String(), args
}
