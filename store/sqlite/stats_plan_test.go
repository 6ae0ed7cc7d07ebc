package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Counting a queue's messages reads only the live states' partial indexes
// and the completed count: never the completed rows.
func TestStatsPlanReadsNoHistory(t *testing.T) {
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "plan.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.DB().Query("EXPLAIN QUERY PLAN "+statsSQL, "q", 0)
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
