-- Computers (environments made from a Deployment's Template, with a
-- durable /workspace), the Commands run in them, and the Commands' output.
-- Times are INTEGER Unix microseconds. A Computer's key is NULL when it has
-- none, and unique among the Computers not deleted. A Command's argv and
-- env are JSON arrays of strings (TEXT); its stdin (NULL when empty) and
-- its output chunks are BLOB, kept byte for byte.

CREATE TABLE computers (
  id            TEXT PRIMARY KEY,
  template      TEXT NOT NULL,
  deployment_id TEXT NOT NULL,
  key           TEXT,
  status        TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  deleted_at    INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX computers_live_key ON computers(key) WHERE key IS NOT NULL AND status <> 'deleted';

CREATE TABLE commands (
  id          TEXT PRIMARY KEY,
  computer_id TEXT NOT NULL,
  argv        TEXT NOT NULL,
  cwd         TEXT NOT NULL DEFAULT '',
  env         TEXT NOT NULL,
  stdin       BLOB,
  timeout_ms  INTEGER NOT NULL DEFAULT 0,
  status      TEXT NOT NULL,
  exit_code   INTEGER,
  error       TEXT NOT NULL DEFAULT '',
  created_at  INTEGER NOT NULL,
  started_at  INTEGER,
  ended_at    INTEGER
);
CREATE INDEX commands_computer ON commands(computer_id, id);
CREATE INDEX commands_unfinished ON commands(created_at, id) WHERE status IN ('queued', 'running');

CREATE TABLE command_logs (
  command_id TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  stream     TEXT NOT NULL,
  data       BLOB NOT NULL,
  at         INTEGER NOT NULL,
  PRIMARY KEY (command_id, seq)
) WITHOUT ROWID;

CREATE INDEX sessions_computer ON sessions(computer_id, id) WHERE computer_id <> '';
