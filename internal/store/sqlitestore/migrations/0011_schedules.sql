-- Cron triggers of the current Deployment's Agents and where their firing
-- stands (one row per Agent and trigger name).

CREATE TABLE schedules (
  id              TEXT PRIMARY KEY,
  agent           TEXT NOT NULL,
  name            TEXT NOT NULL,
  deployment_id   TEXT NOT NULL,
  pattern         TEXT NOT NULL,
  timezone        TEXT NOT NULL,
  input           BLOB,
  overlap         TEXT NOT NULL,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  next_fire_at    INTEGER NOT NULL,
  last_fire_at    INTEGER,
  last_session_id TEXT NOT NULL DEFAULT '',
  missed_count    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE UNIQUE INDEX schedules_agent_name ON schedules(agent, name);
