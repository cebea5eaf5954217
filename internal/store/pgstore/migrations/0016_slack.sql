-- The PostgreSQL form of the SQLite store's 0016_slack.

ALTER TABLE sessions ADD COLUMN slack_channel_id text COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE slack_apps (
  id            text COLLATE "C" PRIMARY KEY,
  name          text NOT NULL,
  team_id       text COLLATE "C" NOT NULL UNIQUE,
  bot_user_id   text COLLATE "C" NOT NULL,
  mode          text NOT NULL,
  mention_agent text COLLATE "C" NOT NULL DEFAULT '',
  sealed        bytea NOT NULL,
  created_at    timestamptz NOT NULL
);

CREATE TABLE slack_users (
  team_id    text COLLATE "C" NOT NULL,
  user_id    text COLLATE "C" NOT NULL,
  identity   text NOT NULL,
  role       text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (team_id, user_id)
);

CREATE TABLE slack_threads (
  session_id text COLLATE "C" PRIMARY KEY,
  app_id     text COLLATE "C" NOT NULL,
  channel_id text COLLATE "C" NOT NULL,
  thread_ts  text COLLATE "C" NOT NULL DEFAULT '',
  cursor     bigint NOT NULL DEFAULT 0,
  done       boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX slack_threads_ts ON slack_threads(app_id, channel_id, thread_ts) WHERE thread_ts <> '';
CREATE INDEX slack_threads_open ON slack_threads(done, session_id);

CREATE TABLE slack_posts (
  session_id text COLLATE "C" NOT NULL,
  key        text COLLATE "C" NOT NULL,
  ts         text COLLATE "C" NOT NULL,
  text       text NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (session_id, key)
);
