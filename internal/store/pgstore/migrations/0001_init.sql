-- The PostgreSQL form of the SQLite store's 0001_init: the same tables and
-- columns. IDs and keys are text in the "C" collation, so that they sort
-- bytewise (UUIDv7 by creation) whatever the database's locale; times are
-- timestamptz (microseconds); JSON is bytea, kept byte for byte.

CREATE TABLE meta (
  key   text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

CREATE TABLE api_keys (
  id         text COLLATE "C" PRIMARY KEY,
  name       text NOT NULL,
  hash       text COLLATE "C" NOT NULL UNIQUE,
  created_at timestamptz NOT NULL
);

CREATE TABLE deployments (
  id          text COLLATE "C" PRIMARY KEY,
  digest      text COLLATE "C" NOT NULL UNIQUE,
  manifest    bytea NOT NULL,
  binary_path text NOT NULL,
  created_at  timestamptz NOT NULL
);

CREATE TABLE sessions (
  id                   text COLLATE "C" PRIMARY KEY,
  deployment_id        text COLLATE "C" NOT NULL,
  root_session_id      text COLLATE "C" NOT NULL,
  agent                text COLLATE "C" NOT NULL,
  template             text NOT NULL,
  computer_id          text COLLATE "C" NOT NULL DEFAULT '',
  parent_session_id    text COLLATE "C" NOT NULL DEFAULT '',
  requester_session_id text COLLATE "C" NOT NULL DEFAULT '',
  key                  text COLLATE "C" NOT NULL DEFAULT '',
  status               text NOT NULL,
  close_after_idle     text NOT NULL,
  hibernate_after_idle text NOT NULL,
  max_turn_duration    text NOT NULL DEFAULT '',
  idle_since           timestamptz,
  initial_turn_id      text COLLATE "C" NOT NULL DEFAULT '',
  created_at           timestamptz NOT NULL
);
CREATE UNIQUE INDEX sessions_agent_key ON sessions(agent, key) WHERE key <> '';
CREATE INDEX sessions_parent ON sessions(parent_session_id) WHERE parent_session_id <> '';

CREATE TABLE turns (
  session_id      text COLLATE "C" NOT NULL,
  sequence        bigint NOT NULL,
  id              text COLLATE "C" NOT NULL,
  status          text NOT NULL,
  input           bytea,
  source          bytea,
  created_at      timestamptz NOT NULL,
  started_at      timestamptz,
  terminal_at     timestamptz,
  result          bytea,
  response        bytea,
  response_staged boolean NOT NULL DEFAULT false,
  error_code      text NOT NULL DEFAULT '',
  error_message   text NOT NULL DEFAULT '',
  output_bytes    bigint NOT NULL DEFAULT 0,
  last_op         bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, sequence)
);
CREATE UNIQUE INDEX turns_id ON turns(id);
CREATE INDEX turns_active ON turns(session_id, status, sequence) WHERE status IN ('queued', 'running');

CREATE TABLE messages (
  id         text COLLATE "C" PRIMARY KEY,
  session_id text COLLATE "C" NOT NULL,
  turn_id    text COLLATE "C" NOT NULL,
  content    bytea NOT NULL,
  source     bytea NOT NULL,
  status     text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX messages_turn ON messages(turn_id, created_at);

CREATE TABLE events (
  session_id text COLLATE "C" NOT NULL,
  sequence   bigint NOT NULL,
  turn_id    text COLLATE "C" NOT NULL DEFAULT '',
  kind       text NOT NULL,
  data       bytea NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (session_id, sequence)
);

CREATE TABLE idempotency (
  scope      text COLLATE "C" NOT NULL,
  key        text COLLATE "C" NOT NULL,
  digest     text NOT NULL,
  response   bytea NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (scope, key)
);
