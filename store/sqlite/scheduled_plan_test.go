package sqlite

import (
	"slices"
	"strings"
	"testing"
)

// A page of delayed messages finds the queue's priorities one probe of
// the ready index each, and reads each priority's delayed range of it in
// (visible time, id) order: no sort, no other index, never the table.
// The throughput of a queue is read through its table's primary key.
func TestScheduledAndThroughputPlans(t *testing.T) {
	s := openInternal(t)
	for _, c := range []struct {
		name string
		plan []string
		want []string // every step that reads a table, in any order
	}{
		{"scheduledPriorities", queryPlan(t, s, s.b.st.Text(qScheduledPriorities), "q"), []string{
			"SEARCH leasehold_messages USING COVERING INDEX leasehold_ready (queue=?)",
			"SEARCH leasehold_messages USING COVERING INDEX leasehold_ready (queue=? AND priority<?)"}},
		{"scheduled", queryPlan(t, s, s.b.st.Text(qScheduled), "q", 0, 0, 0, 0, 10), []string{
			"SEARCH leasehold_messages USING INDEX leasehold_ready (queue=? AND priority=? AND visible_at>?)"}},
		{"throughput", queryPlan(t, s, s.b.st.Text(qThroughput), "q", 0), []string{
			"SEARCH leasehold_throughput USING PRIMARY KEY (queue=? AND minute>?)"}},
	} {
		for _, step := range c.plan {
			if strings.Contains(step, "TEMP B-TREE") || strings.HasPrefix(step, "SCAN leasehold") {
				t.Errorf("the %s plan sorts or scans: %q", c.name, c.plan)
			}
			if strings.Contains(step, "leasehold_") && !slices.Contains(c.want, step) {
				t.Errorf("the %s plan has the step %q, want only %q", c.name, step, c.want)
			}
		}
		for _, w := range c.want {
			if !slices.Contains(c.plan, w) {
				t.Errorf("the %s plan lacks %q: %q", c.name, w, c.plan)
			}
		}
	}
}
