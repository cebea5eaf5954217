-- The PostgreSQL form of the SQLite store's 0002_waits: process records,
-- questions, tokens and durable waits, with the same tables and columns.
-- IDs are text in the "C" collation, times timestamptz, JSON bytea (NULL
-- for nil); a wait's idle timeout is bigint nanoseconds (a time.Duration,
-- kept exactly).

CREATE TABLE processes (
  session_id  text COLLATE "C" PRIMARY KEY,
  launch_id   text COLLATE "C" NOT NULL,
  pid         bigint NOT NULL,
  start_id    text NOT NULL DEFAULT '',
  token_hash  text NOT NULL DEFAULT '',
  computer_id text COLLATE "C" NOT NULL DEFAULT '',
  recovery    text NOT NULL DEFAULT '',
  launched_at timestamptz NOT NULL
);

CREATE TABLE asks (
  id           text COLLATE "C" PRIMARY KEY,
  session_id   text COLLATE "C" NOT NULL,
  turn_id      text COLLATE "C" NOT NULL,
  status       text NOT NULL,
  question     bytea,
  answer       bytea,
  responded_by bytea,
  response_id  text COLLATE "C" NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL,
  resolved_at  timestamptz
);
CREATE INDEX asks_turn ON asks(turn_id, id);
CREATE INDEX asks_pending ON asks(turn_id, id) WHERE status = 'pending';

CREATE TABLE tokens (
  id              text COLLATE "C" PRIMARY KEY,
  session_id      text COLLATE "C" NOT NULL,
  turn_id         text COLLATE "C" NOT NULL DEFAULT '',
  status          text NOT NULL,
  tags            bytea,
  metadata        bytea,
  data            bytea,
  secret_hash     text COLLATE "C" NOT NULL DEFAULT '',
  idempotency_key text COLLATE "C" NOT NULL DEFAULT '',
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz,
  resolved_at     timestamptz
);
CREATE UNIQUE INDEX tokens_session_key ON tokens(session_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tokens_expiring ON tokens(expires_at, id) WHERE status = 'pending' AND expires_at IS NOT NULL;

CREATE TABLE waits (
  id              text COLLATE "C" PRIMARY KEY,
  session_id      text COLLATE "C" NOT NULL,
  turn_id         text COLLATE "C" NOT NULL,
  kind            text NOT NULL,
  target_id       text COLLATE "C" NOT NULL DEFAULT '',
  status          text NOT NULL,
  deadline        timestamptz,
  idle_timeout_ns bigint NOT NULL DEFAULT 0,
  outcome         bytea,
  created_at      timestamptz NOT NULL,
  resolved_at     timestamptz
);
CREATE INDEX waits_open ON waits(session_id, created_at, id) WHERE status = 'waiting';
CREATE INDEX waits_open_target ON waits(target_id, created_at, id) WHERE status = 'waiting';

ALTER TABLE turns ADD COLUMN waited boolean NOT NULL DEFAULT false;
