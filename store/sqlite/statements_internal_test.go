package sqlite

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/store"
)

// Every statement of queries.sql is written in whole, but for the index a
// listing names: no placeholder is left for SQLite to choke on. That each
// is one the store runs, and each it runs is there, sqlstate's tests
// check.
func TestQueriesAreWrittenIn(t *testing.T) {
	st, err := sqlstate.Load[query](queriesSQL, queryNames[:], nil)
	if err != nil {
		t.Fatal(err)
	}
	for q, sql := range st.All() {
		if q == qList {
			sql = strings.Replace(sql, "{index}", listIndex[store.Pending].all, 1)
		}
		if strings.Contains(sql, "{") {
			t.Errorf("statement %s is not fully written in: %q", queryNames[q], sql)
		}
	}
}
