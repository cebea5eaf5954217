-- Process records, questions, tokens and durable waits. Times are INTEGER
-- Unix microseconds; JSON is BLOB, NULL for nil; a wait's idle timeout is
-- INTEGER nanoseconds (a time.Duration, kept exactly).

CREATE TABLE processes (
  session_id  TEXT PRIMARY KEY,
  launch_id   TEXT NOT NULL,
  pid         INTEGER NOT NULL,
  start_id    TEXT NOT NULL DEFAULT '',
  token_hash  TEXT NOT NULL DEFAULT '',
  computer_id TEXT NOT NULL DEFAULT '',
  recovery    TEXT NOT NULL DEFAULT '',
  launched_at INTEGER NOT NULL
);

CREATE TABLE asks (
  id           TEXT PRIMARY KEY,
  session_id   TEXT NOT NULL,
  turn_id      TEXT NOT NULL,
  status       TEXT NOT NULL,
  question     BLOB,
  answer       BLOB,
  responded_by BLOB,
  response_id  TEXT NOT NULL DEFAULT '',
  created_at   INTEGER NOT NULL,
  resolved_at  INTEGER
);
CREATE INDEX asks_turn ON asks(turn_id, id);
CREATE INDEX asks_pending ON asks(turn_id, id) WHERE status = 'pending';

CREATE TABLE tokens (
  id              TEXT PRIMARY KEY,
  session_id      TEXT NOT NULL,
  turn_id         TEXT NOT NULL DEFAULT '',
  status          TEXT NOT NULL,
  tags            BLOB,
  metadata        BLOB,
  data            BLOB,
  secret_hash     TEXT NOT NULL DEFAULT '',
  idempotency_key TEXT NOT NULL DEFAULT '',
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER,
  resolved_at     INTEGER
);
CREATE UNIQUE INDEX tokens_session_key ON tokens(session_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tokens_expiring ON tokens(expires_at, id) WHERE status = 'pending' AND expires_at IS NOT NULL;

CREATE TABLE waits (
  id              TEXT PRIMARY KEY,
  session_id      TEXT NOT NULL,
  turn_id         TEXT NOT NULL,
  kind            TEXT NOT NULL,
  target_id       TEXT NOT NULL DEFAULT '',
  status          TEXT NOT NULL,
  deadline        INTEGER,
  idle_timeout_ns INTEGER NOT NULL DEFAULT 0,
  outcome         BLOB,
  created_at      INTEGER NOT NULL,
  resolved_at     INTEGER
);
CREATE INDEX waits_open ON waits(session_id, created_at, id) WHERE status = 'waiting';
CREATE INDEX waits_open_target ON waits(target_id, created_at, id) WHERE status = 'waiting';

ALTER TABLE turns ADD COLUMN waited INTEGER NOT NULL DEFAULT 0;
