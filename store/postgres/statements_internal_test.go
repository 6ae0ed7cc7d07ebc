package postgres

import (
	"strings"
	"testing"
)

// Every statement of queries.sql is written in whole: no placeholder is
// left for the server to choke on. That each is one the store runs, and
// each it runs is there, sqlstate's tests check.
func TestQueriesAreWrittenIn(t *testing.T) {
	st, err := loadQueries("lh")
	if err != nil {
		t.Fatal(err)
	}
	for q, sql := range st.All() {
		if strings.Contains(sql, "{") {
			t.Errorf("statement %s is not fully written in: %q", queryNames[q], sql)
		}
	}
}
