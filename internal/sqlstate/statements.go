package sqlstate

import (
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strings"

	"github.com/leasehold/leasehold/store"
)

// nameLine starts a statement in a file of statements.
var nameLine = regexp.MustCompile(`(?m)^-- name: (\w+)\n`)

// statementNames returns the names of file's statements, in the file's
// order.
func statementNames(file string) []string {
	var out []string
	for _, m := range nameLine.FindAllStringSubmatch(file, -1) {
		out = append(out, m[1])
	}
	return out
}

// parse splits file into its statements by name, without their comment
// lines. What comes before the first name is the file's header.
func parse(file string) (map[string]string, error) {
	out := map[string]string{}
	marks := nameLine.FindAllStringSubmatchIndex(file, -1)
	for i, m := range marks {
		end := len(file)
		if i+1 < len(marks) {
			end = marks[i+1][0]
		}
		var lines []string
		for line := range strings.Lines(file[m[1]:end]) {
			// Comments are for the reader; the database need not get them
			// with every statement.
			if !strings.HasPrefix(strings.TrimSpace(line), "--") {
				lines = append(lines, line)
			}
		}
		name, sql := file[m[2]:m[3]], strings.TrimSpace(strings.Join(lines, ""))
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("statement %q is named twice", name)
		}
		if sql == "" {
			return nil, fmt.Errorf("statement %q is empty", name)
		}
		out[name] = sql
	}
	return out, nil
}

// Statements are a backend's statements, read by Load, each named by a
// constant of N: Text(n) is the statement the backend calls names[n].
type Statements[N ~int] struct {
	names   []string
	text    []string
	byState [][store.States]string
}

// Load reads from file the statements named in names, passing each
// through expand (nil for none) and then writing the states in, as
// Expand does. A statement with {state} in it differs only by the state:
// it is written out once per state, each with the state's code there, and
// read with InState.
//
// Load fails, naming each, when file lacks one of names or has a statement
// that none of them asks for. The file is built into the backend with the
// code that runs it, so either is a mistake, and it shows when the store
// opens rather than when the statement first runs.
func Load[N ~int](file string, names []string, expand func(string) string) (*Statements[N], error) {
	parsed, err := parse(file)
	if err != nil {
		return nil, err
	}
	st := &Statements[N]{names: names, text: make([]string, len(names)), byState: make([][store.States]string, len(names))}
	var problems []string
	asked := map[string]bool{}
	for n, name := range names {
		sql, ok := parsed[name]
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("statement %d has no name", n))
			continue
		case asked[name]:
			problems = append(problems, fmt.Sprintf("statement %q is asked for twice", name))
			continue
		case !ok:
			problems = append(problems, fmt.Sprintf("no statement %q", name))
			continue
		}
		asked[name] = true
		if expand != nil {
			sql = expand(sql)
		}
		if !strings.Contains(sql, "{state}") {
			st.text[n] = Expand(sql)
			continue
		}
		for s := range st.byState[n] {
			st.byState[n][s] = Expand(strings.ReplaceAll(sql, "{state}", code(store.State(s))))
		}
	}
	for _, name := range statementNames(file) {
		if !asked[name] {
			problems = append(problems, fmt.Sprintf("statement %q is never run", name))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return st, nil
}

// Text returns statement n. A statement that differs by the state has no
// one text: asking for it is a mistake in the backend, which panics.
func (st *Statements[N]) Text(n N) string {
	if st.text[n] == "" {
		panic(fmt.Sprintf("sqlstate: statement %q differs by the state: read it with InState", st.names[n]))
	}
	return st.text[n]
}

// InState returns statement n, one that differs only by the state, for
// state s. Asking for another statement is a mistake in the backend,
// which panics.
func (st *Statements[N]) InState(n N, s store.State) string {
	if st.byState[n][s] == "" {
		panic(fmt.Sprintf("sqlstate: statement %q does not differ by the state: read it with Text", st.names[n]))
	}
	return st.byState[n][s]
}

// All yields every statement's texts: one, or for a statement that
// differs by the state, one per state.
func (st *Statements[N]) All() iter.Seq2[N, string] {
	return func(yield func(N, string) bool) {
		for n := range st.names {
			texts := st.byState[n][:]
			if st.text[n] != "" {
				texts = []string{st.text[n]}
			}
			for _, text := range texts {
				if !yield(N(n), text) {
					return
				}
			}
		}
	}
}
