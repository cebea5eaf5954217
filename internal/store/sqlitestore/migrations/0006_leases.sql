-- Several control-plane nodes: which node supervises a Session's process
-- (a lease with an expiry the node renews), the node a process record
-- belongs to, and deployment binaries kept in the database so that every
-- node can launch every Deployment. The SQLite store serves one node, so
-- leases are rarely used here; the tables match the PostgreSQL store's.
-- Times are INTEGER Unix microseconds.

CREATE TABLE session_leases (
  session_id TEXT PRIMARY KEY,
  node_id    TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX session_leases_node ON session_leases(node_id);

ALTER TABLE processes ADD COLUMN node_id TEXT NOT NULL DEFAULT '';

CREATE TABLE deployment_binaries (
  digest TEXT PRIMARY KEY,
  data   BLOB NOT NULL
);
