package engine

import (
	"context"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

// PayloadExpiryBatch is how many Turns one transaction of ExpirePayloads
// expires at most, so that it never holds the store's writer for long.
const PayloadExpiryBatch = 100

// ExpirePayloads drops the payloads of the Turns that settled longer than
// retention ago (input, result, response, output, messages' content),
// keeping their status, error and timings, in transactions of at most
// PayloadExpiryBatch Turns, until none is left or ctx ends. It returns how
// many Turns it expired. Several nodes may run it at once on one database.
func (e *Engine) ExpirePayloads(ctx context.Context, retention time.Duration) (int, error) {
	if retention <= 0 {
		return 0, invalid("history retention must be positive, got %v", retention)
	}
	total := 0
	for {
		now := e.Now()
		cutoff := now.Add(-retention)
		var n int
		err := e.store.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.ExpireTurnPayloads(ctx, cutoff, now, PayloadExpiryBatch)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n > 0 {
			// Settled Turns in memory may hold payloads that are gone now.
			e.memory.reset()
		}
		if n < PayloadExpiryBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
