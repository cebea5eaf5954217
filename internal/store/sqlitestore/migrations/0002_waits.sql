-- Session processes (for reattachment after a restart), questions, Tokens
-- and durable waits.

CREATE TABLE processes (
  session_id  TEXT PRIMARY KEY,
  launch_id   TEXT NOT NULL,
  pid         INTEGER NOT NULL,
  start_id    TEXT NOT NULL,
  token_hash  TEXT NOT NULL,
  computer_id TEXT NOT NULL,
  recovery    TEXT NOT NULL,
  launched_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE asks (
  id           TEXT PRIMARY KEY,
  session_id   TEXT NOT NULL,
  turn_id      TEXT NOT NULL,
  status       TEXT NOT NULL,
  question     BLOB NOT NULL,
  answer       BLOB,
  responded_by BLOB,
  response_id  TEXT NOT NULL DEFAULT '',
  created_at   INTEGER NOT NULL,
  resolved_at  INTEGER
) WITHOUT ROWID;
CREATE INDEX asks_turn ON asks(turn_id, id);

CREATE TABLE tokens (
  id              TEXT PRIMARY KEY,
  session_id      TEXT NOT NULL,
  turn_id         TEXT NOT NULL,
  status          TEXT NOT NULL,
  tags            BLOB,
  metadata        BLOB,
  data            BLOB,
  secret_hash     TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER,
  resolved_at     INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX tokens_key ON tokens(session_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tokens_expiring ON tokens(expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;

CREATE TABLE waits (
  id              TEXT PRIMARY KEY,
  session_id      TEXT NOT NULL,
  turn_id         TEXT NOT NULL,
  kind            TEXT NOT NULL,
  target_id       TEXT NOT NULL DEFAULT '',
  status          TEXT NOT NULL,
  deadline        INTEGER,
  idle_timeout_us INTEGER NOT NULL,
  outcome         BLOB,
  created_at      INTEGER NOT NULL,
  resolved_at     INTEGER
) WITHOUT ROWID;
CREATE INDEX waits_open ON waits(session_id, created_at) WHERE status = 'waiting';
CREATE INDEX waits_target ON waits(target_id) WHERE status = 'waiting' AND target_id <> '';
