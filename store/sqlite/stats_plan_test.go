package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/sqlstate"
)

// Counting a queue's messages reads only the live states' partial indexes
// and the completed count: never the completed rows.
func TestStatsPlanReadsNoHistory(t *testing.T) {
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := queryPlan(t, s, statsSQL, "q", 0)
	live := []string{"leasehold_ready", "leasehold_waiting", "leasehold_processing", "leasehold_dead", "leasehold_cancelled"}
	for _, step := range plan {
		if !strings.Contains(step, "leasehold_messages") {
			continue
		}
		ok := false
		for _, idx := range live {
			ok = ok || strings.Contains(step, "INDEX "+idx+" ") || strings.HasSuffix(step, "INDEX "+idx)
		}
		if !ok {
			t.Fatalf("a step of the stats plan reads more than live rows: %q\nplan: %q", step, plan)
		}
	}
}

// A claim reads the queue's pending messages through their index, in claim
// order (priority, visibility, id): never the completed ones, and no sort.
func TestClaimPlanUsesTheReadyIndex(t *testing.T) {
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	joined := strings.Join(queryPlan(t, s, sqlstate.Expand(claimSQL), 0, "w", 0, "q", 0, 10), "\n")
	if !strings.Contains(joined, "SEARCH leasehold_messages USING COVERING INDEX leasehold_ready (queue=?)") ||
		strings.Contains(joined, "TEMP B-TREE") || strings.Contains(joined, "SCAN leasehold_messages") {
		t.Fatalf("the claim does not read the ready index in order:\n%s", joined)
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
