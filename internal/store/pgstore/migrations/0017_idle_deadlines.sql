-- Idle closes are deadlines in the store, like waits: idle_close_at is
-- when an open idle Session's closeAfterIdle runs out, indexed so that
-- start-up and the sweep read only the Sessions due. Storage-pressure
-- holds are found by kind, not by visiting every Session.
ALTER TABLE sessions ADD COLUMN idle_close_at timestamptz;
-- Sessions idle before this migration are due at once: the engine checks
-- each against its closeAfterIdle and writes the true deadline.
UPDATE sessions SET idle_close_at = idle_since
 WHERE idle_since IS NOT NULL AND status = 'open' AND close_after_idle NOT IN ('', 'never');
CREATE INDEX sessions_idle_close ON sessions(idle_close_at, id) WHERE idle_close_at IS NOT NULL AND status = 'open';
CREATE INDEX holds_active_kind ON holds(kind, created_at) WHERE released_at IS NULL;
