-- The PostgreSQL form of the SQLite store's 0005_computers: Computers, the
-- Commands run in them and the Commands' output, with the same tables and
-- columns. IDs and keys are text in the "C" collation, times timestamptz;
-- a Computer's key is NULL when it has none, and unique among the
-- Computers not deleted. A Command's argv and env are JSON arrays of
-- strings (text); its stdin (NULL when empty) and its output chunks are
-- bytea, kept byte for byte.

CREATE TABLE computers (
  id            text COLLATE "C" PRIMARY KEY,
  template      text NOT NULL,
  deployment_id text COLLATE "C" NOT NULL,
  key           text COLLATE "C",
  status        text NOT NULL,
  created_at    timestamptz NOT NULL,
  deleted_at    timestamptz
);
CREATE UNIQUE INDEX computers_live_key ON computers(key) WHERE key IS NOT NULL AND status <> 'deleted';

CREATE TABLE commands (
  id          text COLLATE "C" PRIMARY KEY,
  computer_id text COLLATE "C" NOT NULL,
  argv        text NOT NULL,
  cwd         text NOT NULL DEFAULT '',
  env         text NOT NULL,
  stdin       bytea,
  timeout_ms  bigint NOT NULL DEFAULT 0,
  status      text NOT NULL,
  exit_code   bigint,
  error       text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL,
  started_at  timestamptz,
  ended_at    timestamptz
);
CREATE INDEX commands_computer ON commands(computer_id, id);
CREATE INDEX commands_unfinished ON commands(created_at, id) WHERE status IN ('queued', 'running');

CREATE TABLE command_logs (
  command_id text COLLATE "C" NOT NULL,
  seq        bigint NOT NULL,
  stream     text NOT NULL,
  data       bytea NOT NULL,
  at         timestamptz NOT NULL,
  PRIMARY KEY (command_id, seq)
);

CREATE INDEX sessions_computer ON sessions(computer_id, id) WHERE computer_id <> '';
