-- Which node runs a Command (its node_id; '' for one recorded before), and
-- the nodes' heartbeats: a node renews its row with its leases, so that the
-- others can fail the Commands of a node that stopped; incarnation names
-- the running process, so that two processes with one node ID are noticed. Times are INTEGER
-- Unix microseconds.

ALTER TABLE commands ADD COLUMN node_id TEXT NOT NULL DEFAULT '';

CREATE TABLE nodes (
  id          TEXT PRIMARY KEY,
  incarnation TEXT NOT NULL,
  expires_at  INTEGER NOT NULL
);
