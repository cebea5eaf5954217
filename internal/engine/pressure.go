package engine

import (
	"context"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Storage pressure. When the disk of the store runs low, new admission
// (Sessions and Turns; messages to running Turns still pass, so that they
// can finish) is refused with storage_pressure, and every
// Session with work gets a storage_pressure hold, so that no new Turn
// starts and writes more; running Turns finish. When space is back the
// holds are released and the held work goes on.

// errStoragePressure refuses admission while the store's disk is low.
var errStoragePressure = &helmrtype.Error{Code: helmrtype.CodeStoragePressure,
	Message: "the control plane's disk is nearly full; new work is refused until space is freed"}

// StoragePressure reports whether the store's disk is below its floor.
func (e *Engine) StoragePressure() bool { return e.pressure.Load() }

// admitting refuses new work under storage pressure: Sessions, Turns,
// Computers and Commands.
func (e *Engine) admitting() error {
	if e.pressure.Load() {
		return errStoragePressure
	}
	return nil
}

// SetStoragePressure turns storage pressure on or off (the control plane's
// disk monitor calls it when the free space crosses its floor, and at
// start). why is the hold's reason. Pressure is the engine's state; the
// holds it implies are written only on the Sessions with work (found
// through the index of active Turns) and released through the index of
// active holds by kind, so its cost grows with the work held, never with
// all Sessions: at start, with no pressure and no hold left, it reads one
// index probe.
func (e *Engine) SetStoragePressure(ctx context.Context, on bool, why string) error {
	e.pressure.Store(on)
	var touched []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		touched = nil
		now := e.Now()
		held, err := tx.ActiveHoldsOfKind(ctx, helmrtype.HoldStoragePressure)
		if err != nil {
			return err
		}
		if !on {
			for i := range held {
				held[i].ReleasedAt = &now
				if err := tx.UpdateHold(ctx, &held[i]); err != nil {
					return err
				}
				touched = append(touched, held[i].SessionID)
			}
			return nil
		}
		has := make(map[string]bool, len(held))
		for _, h := range held {
			has[h.SessionID] = true
		}
		ids, err := tx.SessionsWithWork(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if has[id] {
				continue
			}
			if _, err := e.placeHoldTx(ctx, tx, id, helmrtype.HoldStoragePressure, why, now); err != nil {
				return err
			}
			touched = append(touched, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range touched {
		e.wake(id)
		if !on {
			e.notify().SessionWork(id)
		}
	}
	return nil
}
