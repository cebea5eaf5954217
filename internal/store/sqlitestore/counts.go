package sqlitestore

import (
	"context"

	"github.com/helmr-go/helmr/internal/store"
)

// Counts runs store.CountQueries.
func (t *tx) Counts(ctx context.Context) (store.Counts, error) {
	c := store.NewCounts()
	for _, q := range store.CountQueries {
		rows, err := t.q.query(ctx, q.SQL)
		if err != nil {
			return c, err
		}
		for rows.Next() {
			var l string
			var n int64
			if err := rows.Scan(&l, &n); err != nil {
				rows.Close()
				return c, err
			}
			q.Put(&c, l, n)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return c, err
		}
	}
	return c, nil
}
