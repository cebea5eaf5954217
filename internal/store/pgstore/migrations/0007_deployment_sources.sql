-- Deployment sources: the digest of the archive of files that a
-- Deployment's Templates' Copy steps read ('' for none). A binary digest
-- and a sources digest together identify a Deployment.

ALTER TABLE deployments ADD COLUMN sources_digest text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE deployments DROP CONSTRAINT deployments_digest_key;
ALTER TABLE deployments ADD CONSTRAINT deployments_digest_sources_key UNIQUE (digest, sources_digest);
