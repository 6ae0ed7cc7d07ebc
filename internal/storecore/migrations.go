package storecore

import (
	"io/fs"
	"sort"
)

// Migrations reads a backend's schema migrations: the .sql files of the
// migrations folder of fsys, in order of their names (0001_init.sql, ...).
// A database records how many it has applied.
func Migrations(fsys fs.FS) []string {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		out[i] = string(b)
	}
	return out
}
