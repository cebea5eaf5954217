-- The PostgreSQL form of the SQLite store's 0011_schedules.

CREATE TABLE schedules (
  id              text COLLATE "C" PRIMARY KEY,
  agent           text COLLATE "C" NOT NULL,
  name            text COLLATE "C" NOT NULL,
  deployment_id   text COLLATE "C" NOT NULL,
  pattern         text NOT NULL,
  timezone        text NOT NULL,
  input           bytea,
  overlap         text NOT NULL,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  next_fire_at    timestamptz NOT NULL,
  last_fire_at    timestamptz,
  last_session_id text COLLATE "C" NOT NULL DEFAULT '',
  missed_count    bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX schedules_agent_name ON schedules(agent, name);
