package pgstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// channel is where the triggers of migration 0006 announce changes.
const channel = "helmr"

// Listen implements store.Listener: it listens on the "helmr" channel on a
// connection of its own and calls fn with the notices of other nodes (those
// whose helmr.node differs from Options.NodeID). It calls resync each time
// it starts listening, the first time included, since notices sent while
// it did not listen are lost; after a lost connection it reconnects with a
// growing pause (up to 2 s).
func (s *Store) Listen(ctx context.Context, fn func(store.Notice), resync func()) error {
	pause := 50 * time.Millisecond
	for {
		err := classify(ctx, s.listenOnce(ctx, fn, resync))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(s.reach.Observe(ctx, err), store.ErrUnavailable) {
			// The Monitor logs the outage once; not every try.
			s.log.Debug("listen for other nodes' changes: the database is unreachable; reconnecting", "err", err)
		} else {
			s.log.Warn("listen for other nodes' changes: connection lost; reconnecting", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func(store.Notice), resync func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	s.reach.Observe(ctx, nil)
	resync()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if nt, ok := ParseNotice(n.Payload); ok && nt.Node != s.node {
			fn(nt)
		}
	}
}

// ParseNotice reads a payload of the "helmr" channel: "e|NODE|SESSION|KIND|TURN"
// for an event, "c|NODE|COMMAND" for a Command's change,
// "c|NODE|COMMAND|KIND" for another notice about a Command, and
// "n|NODE|KIND" for a notice about neither, such as a change of the
// Schedules (Announce).
func ParseNotice(payload string) (store.Notice, bool) {
	f := strings.Split(payload, "|")
	switch {
	case len(f) == 5 && f[0] == "e" && f[2] != "" && f[3] != "":
		return store.Notice{Node: f[1], SessionID: f[2], Kind: f[3], TurnID: f[4]}, true
	case len(f) == 3 && f[0] == "c" && f[2] != "":
		return store.Notice{Node: f[1], Kind: store.NoticeCommand, CommandID: f[2]}, true
	case len(f) == 4 && f[0] == "c" && f[2] != "" && f[3] != "":
		return store.Notice{Node: f[1], Kind: f[3], CommandID: f[2]}, true
	case len(f) == 3 && f[0] == "n" && f[2] != "":
		return store.Notice{Node: f[1], Kind: f[2]}, true
	}
	return store.Notice{}, false
}
