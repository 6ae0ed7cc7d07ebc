package sqlite

import (
	"slices"
	"strings"
	"testing"
)

// The statements of runs and late completions, the placement of a
// fairness group's message, the lookup of a unique key, and a rerun's or
// a delete's by id find their
// rows through an index of live messages of the queue, key, group or
// unique key, or through the primary key: none reads the table, history
// included. A key's waiting messages come from leasehold_waiting in their
// line's order, without a sort.
func TestRunPlansSearch(t *testing.T) {
	s := openInternal(t)
	plans := []struct {
		op   string
		plan []string
	}{
		{"claimable", queryPlan(t, s, s.b.st.Text(qClaimable), "q", 0, 10)},
		{"runNext", queryPlan(t, s, s.b.st.Text(qRunNext), "q", "k", 10, 1)},
		{"claimRun", queryPlan(t, s, s.b.st.Text(qClaimRun), 0, "w", 0, "q", 0, "[1,2]", true)},
		{"running", queryPlan(t, s, s.b.st.Text(qRunning), "q", "k")},
		{"promote", queryPlan(t, s, s.b.st.Text(qPromote), "q", "k")},
		{"hold", queryPlan(t, s, s.b.st.Text(qHold), true, "[1,2]")},
		{"completeLate", queryPlan(t, s, s.b.st.Text(qCompleteLate), 0, "[[1,2,true]]")},
		{"completedUnder", queryPlan(t, s, s.b.st.Text(qCompletedUnder), "[[1,2]]")},
		{"uniqueGet", queryPlan(t, s, s.b.st.Text(qUniqueGet), "k", 1)},
		{"redrive", queryPlan(t, s, s.b.st.Text(qRedrive), 0, 1)},
		{"hasten", queryPlan(t, s, s.b.st.Text(qHasten), 0, "[1,2]")},
		{"deleteMessages", queryPlan(t, s, s.b.st.Text(qDeleteMessages), "[1,2]")},
		{"messageOf", queryPlan(t, s, s.b.st.Text(qMessageOf), 1)},
		{"insert of a fairness group", queryPlan(t, s, s.b.st.Text(qInsert), "q", nil, nil, nil, []byte{}, 5, 0, 0, nil, 0, nil, nil, "g", nil)},
	}
	for _, p := range plans {
		t.Logf("%s: %q", p.op, p.plan)
		for _, step := range p.plan {
			if strings.Contains(step, "leasehold_messages") && !strings.HasPrefix(step, "SEARCH ") {
				t.Errorf("a step of the %s plan reads the whole table: %q\nplan: %q", p.op, step, p.plan)
			}
		}
		if (p.op == "runNext" || p.op == "promote") && slices.ContainsFunc(p.plan, func(step string) bool { return strings.Contains(step, "TEMP B-TREE") }) {
			t.Errorf("the %s plan sorts a key's waiting messages: %q", p.op, p.plan)
		}
		if !slices.ContainsFunc(p.plan, func(step string) bool { return strings.HasPrefix(step, "SEARCH ") }) {
			t.Errorf("the %s plan searches nothing: %q", p.op, p.plan)
		}
	}
}
