package postgres

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/store"
)

// queriesSQL holds every statement the store runs, by name; see its header
// for what is written in when the store opens.
//
//go:embed queries.sql
var queriesSQL string

// statements holds the SQL of every operation, with the schema and the
// states' codes written in.
type statements struct {
	lockKeys, notify, isolation, insertBulk, insertOne, dedupGet, dedupClear, claim, extend, complete, promote,
	current, retry, kill, release, reapScan, expired, deadRows, redrive, purge, stats, countCompleted,
	deleteQueue, queues, pause, resume, cancelledOf, keysOf, cancelRows, cancel, holdMaintainer, releaseMaintainer,
	purgeQueue, createQueue, queueRecord, lockQueueRecord, setQueueAttributes, get, blockedKeys string
	list, listBefore, prune [store.States]string
}

// queryName starts a statement in queries.sql.
var queryName = regexp.MustCompile(`(?m)^-- name: (\w+)\n`)

// parseQueries splits queries.sql into its statements by name, without
// their comment lines.
func parseQueries(text string) map[string]string {
	out := map[string]string{}
	marks := queryName.FindAllStringSubmatchIndex(text, -1)
	for i, m := range marks {
		end := len(text)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		var lines []string
		for line := range strings.Lines(text[m[1]:end]) {
			// Comments are for the reader; the server need not get them
			// with every statement.
			if !strings.HasPrefix(strings.TrimSpace(line), "--") {
				lines = append(lines, line)
			}
		}
		out[text[m[2]:m[3]]] = strings.TrimSpace(strings.Join(lines, ""))
	}
	return out
}

func newStatements(schema string) statements {
	queries := parseQueries(queriesSQL)
	q := func(name string) string {
		sql, ok := queries[name]
		if !ok {
			panic(fmt.Sprintf("postgres: queries.sql has no statement %q", name)) // a test reads them all
		}
		return expand(sql, schema)
	}
	st := statements{
		lockKeys: q("lockKeys"), notify: q("notify"), isolation: q("isolation"),
		insertBulk: q("insertBulk"), insertOne: q("insertOne"), dedupGet: q("dedupGet"), dedupClear: q("dedupClear"),
		claim: q("claim"), extend: q("extend"), complete: q("complete"), promote: q("promote"),
		current: q("current"), retry: q("retry"), kill: q("kill"), release: q("release"),
		reapScan: q("reapScan"), expired: q("expired"), deadRows: q("deadRows"), redrive: q("redrive"), purge: q("purge"),
		stats: q("stats"), countCompleted: q("countCompleted"),
		deleteQueue: q("deleteQueue"), queues: q("queues"), pause: q("pause"), resume: q("resume"),
		cancelledOf: q("cancelledOf"), keysOf: q("keysOf"), cancelRows: q("cancelRows"), cancel: q("cancel"),
		holdMaintainer: q("holdMaintainer"), releaseMaintainer: q("releaseMaintainer"),
		purgeQueue: q("purgeQueue"), createQueue: q("createQueue"), queueRecord: q("queueRecord"),
		lockQueueRecord: q("lockQueueRecord"), setQueueAttributes: q("setQueueAttributes"),
		get: q("get"), blockedKeys: q("blockedKeys"),
	}
	list, listBefore, prune := q("list"), q("listBefore"), q("prune")
	for state := range st.list {
		st.list[state] = strings.ReplaceAll(list, "{state}", strconv.Itoa(state))
		st.listBefore[state] = strings.ReplaceAll(listBefore, "{state}", strconv.Itoa(state))
		st.prune[state] = strings.ReplaceAll(prune, "{state}", strconv.Itoa(state))
	}
	return st
}
