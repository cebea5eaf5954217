-- Deployment sources: the digest of the archive of files that a
-- Deployment's Templates' Copy steps read ('' for none). A binary digest
-- and a sources digest together identify a Deployment, so the UNIQUE on
-- digest alone becomes UNIQUE(digest, sources_digest); SQLite cannot drop a
-- column constraint, so the table is rebuilt (no table references it).

CREATE TABLE deployments_new (
  id             TEXT PRIMARY KEY,
  digest         TEXT NOT NULL,
  manifest       TEXT NOT NULL,
  binary_path    TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  sources_digest TEXT NOT NULL DEFAULT '',
  UNIQUE (digest, sources_digest)
);
INSERT INTO deployments_new(id, digest, manifest, binary_path, created_at, sources_digest)
  SELECT id, digest, manifest, binary_path, created_at, '' FROM deployments;
DROP TABLE deployments;
ALTER TABLE deployments_new RENAME TO deployments;
