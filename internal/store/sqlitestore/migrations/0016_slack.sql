-- Slack channel Sessions (docs/slack.md): connected apps (credentials
-- sealed with the control plane's secrets key), Slack users mapped to
-- responder identities, the thread each Slack Session owns with the
-- projector's durable cursor, and what each bot post of a thread shows.

ALTER TABLE sessions ADD COLUMN slack_channel_id TEXT NOT NULL DEFAULT '';

CREATE TABLE slack_apps (
  id            TEXT PRIMARY KEY,
  name          TEXT NOT NULL,
  team_id       TEXT NOT NULL UNIQUE,
  bot_user_id   TEXT NOT NULL,
  mode          TEXT NOT NULL,
  mention_agent TEXT NOT NULL DEFAULT '',
  sealed        BLOB NOT NULL,
  created_at    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE slack_users (
  team_id    TEXT NOT NULL,
  user_id    TEXT NOT NULL,
  identity   TEXT NOT NULL,
  role       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (team_id, user_id)
) WITHOUT ROWID;

CREATE TABLE slack_threads (
  session_id TEXT PRIMARY KEY,
  app_id     TEXT NOT NULL,
  channel_id TEXT NOT NULL,
  thread_ts  TEXT NOT NULL DEFAULT '',
  cursor     INTEGER NOT NULL DEFAULT 0,
  done       INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX slack_threads_ts ON slack_threads(app_id, channel_id, thread_ts) WHERE thread_ts <> '';
CREATE INDEX slack_threads_open ON slack_threads(done, session_id);

CREATE TABLE slack_posts (
  session_id TEXT NOT NULL,
  key        TEXT NOT NULL,
  ts         TEXT NOT NULL,
  text       TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, key)
) WITHOUT ROWID;
