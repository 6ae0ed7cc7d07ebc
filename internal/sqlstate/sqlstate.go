// Package sqlstate reads the SQL backends' statements, by name, from the
// file each keeps them in, and writes message states into them by name, so
// that the codes stored in their state columns come from one definition,
// store.State: {pending}, {waiting}, {processing}, {completed}, {dead} and
// {cancelled} in a statement become those states' numbers, and
// {maxErrors} becomes store.MaxErrors, the length of a message's error
// history.
//
// In a file of statements, a "-- name: X" line starts the statement X; the
// comment lines under it say why it is written so, and are not sent to the
// database. The code names each statement with a constant, and the store
// fails to open when the file and the constants disagree. Collect reads
// the rows of a statement run through database/sql.
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
	"{maxErrors}", strconv.Itoa(store.MaxErrors),
)

func code(s store.State) string { return strconv.Itoa(int(s)) }

// Expand replaces each state's name in sql with its code, and
// {maxErrors} with store.MaxErrors.
func Expand(sql string) string { return names.Replace(sql) }
