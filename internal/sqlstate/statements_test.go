package sqlstate_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/sqlstate"
	"github.com/leasehold/leasehold/store"
)

const file = `-- The header, before any name.

-- name: claim
-- Why the claim is written so.
SELECT id FROM {s}.messages
	-- An indented comment goes too.
WHERE state = {pending}

-- name: list
SELECT id FROM {s}.messages WHERE state = {state} AND queue <> '{dead}'
`

func TestLoad(t *testing.T) {
	const qClaim, qList = 0, 1
	st, err := sqlstate.Load[int](file, []string{"claim", "list"}, func(sql string) string { return strings.ReplaceAll(sql, "{s}", "lh") })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Text(qClaim), "SELECT id FROM lh.messages\nWHERE state = 0"; got != want {
		t.Errorf("Text(claim) = %q, want %q", got, want)
	}
	if got, want := st.InState(qList, store.Dead), "SELECT id FROM lh.messages WHERE state = 4 AND queue <> '4'"; got != want {
		t.Errorf("InState(list, dead) = %q, want %q", got, want)
	}
	n := 0
	for range st.All() {
		n++
	}
	if want := 1 + store.States; n != want {
		t.Errorf("All yields %d texts, want %d", n, want)
	}
	for name, read := range map[string]func(){"Text(list)": func() { st.Text(qList) }, "InState(claim)": func() { st.InState(qClaim, store.Pending) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			read()
		}()
	}
}

// The file and the names the backend asks for must agree, or the store
// does not open.
func TestLoadRefusesDisagreement(t *testing.T) {
	for _, c := range []struct {
		file  string
		names []string
		want  string
	}{
		{file, []string{"claim"}, `statement "list" is never run`},
		{file, []string{"claim", "list", "extend"}, `no statement "extend"`},
		{file, []string{"claim", "", "list"}, `statement 1 has no name`},
		{file, []string{"claim", "list", "claim"}, `statement "claim" is asked for twice`},
		{file + "\n-- name: claim\nSELECT 1\n", []string{"claim", "list"}, `statement "claim" is named twice`},
		{file + "\n-- name: extend\n-- Nothing but a comment.\n", []string{"claim", "list", "extend"}, `statement "extend" is empty`},
	} {
		_, err := sqlstate.Load[int](c.file, c.names, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%q) = %v, want an error with %q", c.names, err, c.want)
		}
	}
}
