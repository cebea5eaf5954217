-- The PostgreSQL form of the SQLite store's 0003_holds.

CREATE TABLE holds (
  id           text COLLATE "C" PRIMARY KEY,
  session_id   text COLLATE "C" NOT NULL,
  kind         text COLLATE "C" NOT NULL,
  can_release  boolean NOT NULL,
  reason       text NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL,
  released_at  timestamptz,
  recovered_at timestamptz
);
CREATE INDEX holds_active ON holds(session_id, created_at) WHERE released_at IS NULL;
CREATE INDEX holds_recover ON holds(session_id, created_at) WHERE released_at IS NOT NULL AND recovered_at IS NULL;
