// Package sqlstate writes message states into the SQL of the backends by
// name, so that the codes stored in their state columns come from one
// definition, store.State: {pending}, {waiting}, {processing},
// {completed}, {dead} and {cancelled} in a statement become those states'
// numbers.
package sqlstate

import (
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/store"
)

var names = strings.NewReplacer(
	"{pending}", code(store.Pending),
	"{waiting}", code(store.Waiting),
	"{processing}", code(store.Processing),
	"{completed}", code(store.Completed),
	"{dead}", code(store.Dead),
	"{cancelled}", code(store.Cancelled),
)

func code(s store.State) string { return strconv.Itoa(int(s)) }

// Expand replaces each state's name in sql with its code.
func Expand(sql string) string { return names.Replace(sql) }
