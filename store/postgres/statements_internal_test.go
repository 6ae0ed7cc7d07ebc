package postgres

import (
	"reflect"
	"strings"
	"testing"
)

// Every statement in queries.sql is one the store runs, and every one it
// runs is there, with every placeholder written in.
func TestQueriesFileIsTheStatements(t *testing.T) {
	queries := parseQueries(queriesSQL)
	st := newStatements("lh")
	v := reflect.ValueOf(st)
	fields := map[string]bool{}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		fields[name] = true
		var texts []string
		if f := v.Field(i); f.Kind() == reflect.String {
			texts = []string{f.String()}
		} else {
			for j := range f.Len() {
				texts = append(texts, f.Index(j).String())
			}
		}
		for _, text := range texts {
			if text == "" || strings.Contains(text, "{") || strings.Contains(text, "-- name:") {
				t.Errorf("statement %s is empty or not fully written in: %q", name, text)
			}
		}
	}
	for name := range queries {
		if !fields[name] {
			t.Errorf("queries.sql has %q, which the store never runs", name)
		}
	}
	if len(queries) != len(fields) {
		t.Errorf("queries.sql has %d statements, the store runs %d", len(queries), len(fields))
	}
}
