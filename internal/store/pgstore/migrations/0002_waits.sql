-- The PostgreSQL form of the SQLite store's 0002_waits: the same tables and
-- columns.

CREATE TABLE processes (
  session_id  text COLLATE "C" PRIMARY KEY,
  launch_id   text COLLATE "C" NOT NULL,
  pid         bigint NOT NULL,
  start_id    text COLLATE "C" NOT NULL,
  token_hash  text COLLATE "C" NOT NULL,
  computer_id text COLLATE "C" NOT NULL,
  recovery    text COLLATE "C" NOT NULL,
  launched_at timestamptz NOT NULL
);

CREATE TABLE asks (
  id           text COLLATE "C" PRIMARY KEY,
  session_id   text COLLATE "C" NOT NULL,
  turn_id      text COLLATE "C" NOT NULL,
  status       text COLLATE "C" NOT NULL,
  question     bytea NOT NULL,
  answer       bytea,
  responded_by bytea,
  response_id  text COLLATE "C" NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL,
  resolved_at  timestamptz
);
CREATE INDEX asks_turn ON asks(turn_id, id);

CREATE TABLE tokens (
  id              text COLLATE "C" PRIMARY KEY,
  session_id      text COLLATE "C" NOT NULL,
  turn_id         text COLLATE "C" NOT NULL,
  status          text COLLATE "C" NOT NULL,
  tags            bytea,
  metadata        bytea,
  data            bytea,
  secret_hash     text COLLATE "C" NOT NULL,
  idempotency_key text COLLATE "C" NOT NULL DEFAULT '',
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  resolved_at     timestamptz
);
CREATE UNIQUE INDEX tokens_key ON tokens(session_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tokens_expiring ON tokens(expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;

CREATE TABLE waits (
  id              text COLLATE "C" PRIMARY KEY,
  session_id      text COLLATE "C" NOT NULL,
  turn_id         text COLLATE "C" NOT NULL,
  kind            text COLLATE "C" NOT NULL,
  target_id       text COLLATE "C" NOT NULL DEFAULT '',
  status          text COLLATE "C" NOT NULL,
  deadline        timestamptz,
  idle_timeout_us bigint NOT NULL,
  outcome         bytea,
  created_at      timestamptz NOT NULL,
  resolved_at     timestamptz
);
CREATE INDEX waits_open ON waits(session_id, created_at) WHERE status = 'waiting';
CREATE INDEX waits_target ON waits(target_id) WHERE status = 'waiting' AND target_id <> '';
