package engine

import (
	"context"
	"errors"

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
// disk monitor calls it when the free space crosses its floor). why is the
// hold's reason.
func (e *Engine) SetStoragePressure(ctx context.Context, on bool, why string) error {
	e.pressure.Store(on)
	var touched []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		touched = nil
		now := e.Now()
		for after := ""; ; {
			page, err := tx.ListSessions(ctx, store.SessionFilter{Statuses: []string{helmrtype.SessionOpen, helmrtype.SessionClosing}, AfterID: after, Limit: 100})
			if err != nil {
				return err
			}
			for _, s := range page {
				after = s.ID
				hs, err := tx.ActiveHolds(ctx, []string{s.ID})
				if err != nil {
					return err
				}
				var mine *store.Hold
				for i := range hs {
					if hs[i].Kind == helmrtype.HoldStoragePressure {
						mine = &hs[i]
					}
				}
				switch {
				case on && mine == nil:
					if _, err := tx.ActiveTurn(ctx, s.ID); errors.Is(err, store.ErrNotFound) {
						continue // no work to hold
					} else if err != nil {
						return err
					}
					if _, err := e.placeHoldTx(ctx, tx, s.ID, helmrtype.HoldStoragePressure, why, now); err != nil {
						return err
					}
					touched = append(touched, s.ID)
				case !on && mine != nil:
					mine.ReleasedAt = &now
					if err := tx.UpdateHold(ctx, mine); err != nil {
						return err
					}
					touched = append(touched, s.ID)
				}
			}
			if len(page) < 100 {
				return nil
			}
		}
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
