CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE api_keys (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  hash       TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);

CREATE TABLE deployments (
  id          TEXT PRIMARY KEY,
  digest      TEXT NOT NULL UNIQUE,
  manifest    TEXT NOT NULL,
  binary_path TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);

CREATE TABLE sessions (
  id                   TEXT PRIMARY KEY,
  deployment_id        TEXT NOT NULL,
  root_session_id      TEXT NOT NULL,
  agent                TEXT NOT NULL,
  template             TEXT NOT NULL,
  computer_id          TEXT NOT NULL DEFAULT '',
  parent_session_id    TEXT NOT NULL DEFAULT '',
  requester_session_id TEXT NOT NULL DEFAULT '',
  key                  TEXT NOT NULL DEFAULT '',
  status               TEXT NOT NULL,
  close_after_idle     TEXT NOT NULL,
  hibernate_after_idle TEXT NOT NULL,
  max_turn_duration    TEXT NOT NULL DEFAULT '',
  idle_since           INTEGER,
  initial_turn_id      TEXT NOT NULL DEFAULT '',
  created_at           INTEGER NOT NULL
);
CREATE UNIQUE INDEX sessions_agent_key ON sessions(agent, key) WHERE key <> '';
CREATE INDEX sessions_parent ON sessions(parent_session_id) WHERE parent_session_id <> '';

CREATE TABLE turns (
  session_id      TEXT NOT NULL,
  sequence        INTEGER NOT NULL,
  id              TEXT NOT NULL,
  status          TEXT NOT NULL,
  input           BLOB,
  source          BLOB,
  created_at      INTEGER NOT NULL,
  started_at      INTEGER,
  terminal_at     INTEGER,
  result          BLOB,
  response        BLOB,
  response_staged INTEGER NOT NULL DEFAULT 0,
  error_code      TEXT NOT NULL DEFAULT '',
  error_message   TEXT NOT NULL DEFAULT '',
  output_bytes    INTEGER NOT NULL DEFAULT 0,
  last_op         INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;
CREATE UNIQUE INDEX turns_id ON turns(id);
CREATE INDEX turns_active ON turns(session_id, status, sequence) WHERE status IN ('queued', 'running');

CREATE TABLE messages (
  id         TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  turn_id    TEXT NOT NULL,
  content    BLOB NOT NULL,
  source     BLOB NOT NULL,
  status     TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX messages_turn ON messages(turn_id, created_at);

CREATE TABLE events (
  session_id TEXT NOT NULL,
  sequence   INTEGER NOT NULL,
  turn_id    TEXT NOT NULL DEFAULT '',
  kind       TEXT NOT NULL,
  data       BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;

CREATE TABLE idempotency (
  scope      TEXT NOT NULL,
  key        TEXT NOT NULL,
  digest     TEXT NOT NULL,
  response   BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
