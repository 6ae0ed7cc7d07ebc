package sqlstate

import "database/sql"

// Collect reads every row of rows with scan, in order, and closes rows:
// the loop of each listing the SQL backends read through database/sql.
// An error from scan, from the rows or from closing them ends it: a
// statement that writes (UPDATE ... RETURNING) may report its error only
// when its rows are closed.
func Collect[T any](rows *sql.Rows, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return out, nil
}
