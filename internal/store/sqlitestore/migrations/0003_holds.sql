-- Holds on Sessions (interrupt, process_failed, recovery_gap,
-- storage_pressure).

CREATE TABLE holds (
  id           TEXT PRIMARY KEY,
  session_id   TEXT NOT NULL,
  kind         TEXT NOT NULL,
  can_release  INTEGER NOT NULL,
  reason       TEXT NOT NULL DEFAULT '',
  created_at   INTEGER NOT NULL,
  released_at  INTEGER,
  recovered_at INTEGER
) WITHOUT ROWID;
CREATE INDEX holds_active ON holds(session_id, created_at) WHERE released_at IS NULL;
CREATE INDEX holds_recover ON holds(session_id, created_at) WHERE released_at IS NOT NULL AND recovered_at IS NULL;
