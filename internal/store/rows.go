package store

// Rows is the part of a database cursor (pgx.Rows, *sql.Rows) that
// ScanPairs reads; the caller closes it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanPairs reads rows of two text columns into a map from the first
// column to the second, for the stores' listings by key (such as Leases).
func ScanPairs(rows Rows) (map[string]string, error) {
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}
