-- The PostgreSQL form of the SQLite store's 0008_nodes: the node that runs
-- a Command, and the nodes' heartbeats (expiry on the database's clock).

ALTER TABLE commands ADD COLUMN node_id text COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE nodes (
  id          text COLLATE "C" PRIMARY KEY,
  incarnation text COLLATE "C" NOT NULL,
  expires_at  timestamptz NOT NULL
);
