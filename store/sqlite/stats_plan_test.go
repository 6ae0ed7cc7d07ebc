package sqlite

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/store"
)

// Counting a queue's messages, or every queue's, and listing a page of
// queues read only the live states' partial indexes and the completed
// counts: never the completed rows.
func TestStatsPlanReadsNoHistory(t *testing.T) {
	s := openInternal(t)
	live := []string{"leasehold_ready", "leasehold_waiting", "leasehold_processing", "leasehold_dead", "leasehold_cancelled"}
	for name, plan := range map[string][]string{
		"stats":        queryPlan(t, s, s.b.st.Text(qStats), "q", 0),
		"allStats":     queryPlan(t, s, s.b.st.Text(qAllStats), 0),
		"queuesAfter":  queryPlan(t, s, s.b.st.Text(qQueuesAfter), "q", 50),
		"queuesBefore": queryPlan(t, s, s.b.st.Text(qQueuesBefore), "q", 50),
	} {
		seen := 0
		for _, step := range plan {
			if !strings.Contains(step, "leasehold_messages") {
				continue
			}
			seen++
			ok := false
			for _, idx := range live {
				ok = ok || strings.Contains(step, "INDEX "+idx+" ") || strings.HasSuffix(step, "INDEX "+idx)
			}
			if !ok {
				t.Fatalf("a step of the %s plan reads more than live rows: %q\nplan: %q", name, step, plan)
			}
		}
		if seen == 0 {
			t.Fatalf("the %s plan reads no index of messages: %q", name, plan)
		}
	}
}

// A claim reads the queue's pending messages through their index, in claim
// order (priority, visibility, id): never the completed ones, and no sort.
func TestClaimPlanUsesTheReadyIndex(t *testing.T) {
	s := openInternal(t)
	joined := strings.Join(queryPlan(t, s, s.b.st.Text(qClaim), 0, "w", 0, "q", 0, 10), "\n")
	if !strings.Contains(joined, "SEARCH leasehold_messages USING COVERING INDEX leasehold_ready (queue=?)") ||
		strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN leasehold_messages") {
		t.Fatalf("the claim does not read the ready index in order:\n%s", joined)
	}
}

// Each listing reads the index meant for it, in id order where the index
// holds ids after the queue (and key): a page of completed messages, or of
// a key's, never walks the table, the primary key or another state's
// index. The listings of pending, waiting and processing messages sort
// the live rows their index yields: a key's waiting messages too, which
// leasehold_waiting holds in their line's order, not by id.
func TestListPlansUseTheirIndexes(t *testing.T) {
	s := openInternal(t)
	for _, c := range []struct {
		f    store.ListFilter
		want string // the one step
	}{
		{store.ListFilter{State: store.Completed}, "SEARCH leasehold_messages USING INDEX leasehold_completed_queue (queue=? AND id>?)"},
		{store.ListFilter{State: store.Completed, Kind: "email"}, "SEARCH leasehold_messages USING INDEX leasehold_completed_kind (queue=? AND kind=? AND id>?)"},
		{store.ListFilter{State: store.Completed, Key: "k", Kind: "email"}, "SEARCH leasehold_messages USING INDEX leasehold_finished_key (queue=? AND key=? AND id>?)"},
		{store.ListFilter{State: store.Cancelled, Kind: "email"}, "SEARCH leasehold_messages USING INDEX leasehold_cancelled (queue=? AND id>?)"},
		{store.ListFilter{State: store.Completed, BeforeID: 10}, "SEARCH leasehold_messages USING INDEX leasehold_completed_queue (queue=? AND id>? AND id<?)"},
		{store.ListFilter{State: store.Completed, Key: "k"}, "SEARCH leasehold_messages USING INDEX leasehold_finished_key (queue=? AND key=? AND id>?)"},
		{store.ListFilter{State: store.Dead, Key: "k", Reason: store.ReasonPermanent}, "SEARCH leasehold_messages USING INDEX leasehold_finished_key (queue=? AND key=? AND id>?)"},
		{store.ListFilter{State: store.Cancelled, Key: "k", BeforeID: 10}, "SEARCH leasehold_messages USING INDEX leasehold_finished_key (queue=? AND key=? AND id>? AND id<?)"},
		{store.ListFilter{State: store.Dead, Reason: store.ReasonPermanent}, "SEARCH leasehold_messages USING INDEX leasehold_dead (queue=? AND id>?)"},
		{store.ListFilter{State: store.Cancelled}, "SEARCH leasehold_messages USING INDEX leasehold_cancelled (queue=? AND id>?)"},
		{store.ListFilter{State: store.Waiting, Key: "k"}, "SEARCH leasehold_messages USING INDEX leasehold_waiting (queue=? AND key=?)"},
		{store.ListFilter{State: store.Pending, Key: "k"}, "SEARCH leasehold_messages USING INDEX leasehold_key_head (queue=? AND key=? AND rowid>?)"},
		{store.ListFilter{State: store.Processing, Key: "k", Kind: "email"}, "SEARCH leasehold_messages USING INDEX leasehold_key_head (queue=? AND key=? AND rowid>?)"},
		{store.ListFilter{State: store.Pending}, "SEARCH leasehold_messages USING INDEX leasehold_ready (queue=?)"},
		{store.ListFilter{State: store.Waiting}, "SEARCH leasehold_messages USING INDEX leasehold_waiting (queue=?)"},
		{store.ListFilter{State: store.Processing}, "SCAN leasehold_messages USING INDEX leasehold_processing"},
	} {
		c.f.Queue, c.f.Limit = "q", 100
		query, args := s.b.st.listSQL(c.f)
		var steps []string
		for _, step := range queryPlan(t, s, query, args...) {
			if !strings.HasPrefix(step, "USE TEMP B-TREE FOR ORDER BY") {
				steps = append(steps, step)
			}
		}
		if len(steps) != 1 || steps[0] != c.want {
			t.Errorf("List(%+v) reads %q, want %q", c.f, steps, c.want)
		}
	}
}

// Get reads one row through the primary key.
func TestGetPlanUsesThePrimaryKey(t *testing.T) {
	s := openInternal(t)
	if plan := queryPlan(t, s, s.b.st.Text(qGet), 1); len(plan) != 1 || plan[0] != "SEARCH leasehold_messages USING INTEGER PRIMARY KEY (rowid=?)" {
		t.Fatalf("Get reads %q", plan)
	}
}

// Queues and BlockedKeys read the indexes of live, dead and cancelled
// messages only (and the counts and settings): never the completed rows.
func TestQueuesAndBlockedKeysPlansReadNoHistory(t *testing.T) {
	s := openInternal(t)
	readsOnly(t, "Queues", queryPlan(t, s, s.b.st.Text(qQueues)),
		"leasehold_ready", "leasehold_waiting", "leasehold_processing", "leasehold_dead", "leasehold_cancelled")
	readsOnly(t, "BlockedKeys", queryPlan(t, s, s.b.st.Text(qBlockedKeys), "q", "", 100), "leasehold_waiting", "leasehold_key_head")
}

// readsOnly fails the test unless each step of plan that reads the
// messages reads one of the indexes, by a search or, for the recursions'
// first rows, a scan of the index.
func readsOnly(t *testing.T, op string, plan []string, indexes ...string) {
	t.Helper()
	for _, step := range plan {
		if !strings.Contains(step, "leasehold_messages") {
			continue
		}
		ok := false
		for _, idx := range indexes {
			ok = ok || strings.Contains(step, "INDEX "+idx+" ") || strings.HasSuffix(step, "INDEX "+idx)
		}
		if !ok {
			t.Errorf("a step of the %s plan reads more than live rows: %q\nplan: %q", op, step, plan)
		}
	}
}

// queryPlan returns the steps of SQLite's plan for query.
func queryPlan(t *testing.T, s *Store, query string, args ...any) []string {
	t.Helper()
	rows, err := s.DB().Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return plan
}

// A move reads the index of the state it moves, in its order, without a
// sort: pending messages as a claim reads them, dead ones by id; it
// finds the records of the queues it moves to through their primary key;
// and it moves each through the primary key, looking up its key's head
// in the new queue through the key heads' index.
func TestMovePlansUseTheirIndexes(t *testing.T) {
	s := openInternal(t)
	for _, c := range []struct {
		name string
		plan []string
		want []string
	}{
		{"movablePending", queryPlan(t, s, s.b.st.Text(qMovablePending), "q", 0, 10, true),
			[]string{"SEARCH leasehold_messages USING INDEX leasehold_ready (queue=?)"}},
		{"movableDead", queryPlan(t, s, s.b.st.Text(qMovableDead), "q", true, 10),
			[]string{"SEARCH leasehold_messages USING INDEX leasehold_dead (queue=?)"}},
		{"recorded", queryPlan(t, s, s.b.st.Text(qRecorded), "q"),
			[]string{"SEARCH leasehold_queues USING PRIMARY KEY (queue=?)"}},
		{"transfer", queryPlan(t, s, s.b.st.Text(qTransfer), 1, "q", 0, false, nil, "", 5, nil, 7),
			[]string{"SEARCH leasehold_messages USING INTEGER PRIMARY KEY (rowid=?)", "SEARCH h USING INDEX leasehold_key_head (queue=? AND key=?)"}},
	} {
		joined := strings.Join(c.plan, "\n")
		for _, w := range c.want {
			if !strings.Contains(joined, w) {
				t.Errorf("the %s plan lacks %q:\n%s", c.name, w, joined)
			}
		}
		if strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN ") {
			t.Errorf("the %s plan sorts or scans:\n%s", c.name, joined)
		}
	}
}
