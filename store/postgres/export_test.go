package postgres

// ReapSQL is the reaper's statement for schema, and ReapSettings the
// statement that starts its transaction: for tests of its plan.
func ReapSQL(schema string) string { return newStatements(schema).reap }

const ReapSettings = reapSettings
