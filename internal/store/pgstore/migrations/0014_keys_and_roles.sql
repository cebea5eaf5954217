-- The PostgreSQL form of the SQLite store's 0014_keys_and_roles: API keys
-- get a role, the first characters of their secret and a revocation time;
-- keys made before it are admin keys with no prefix. Questions are listed
-- by status, newest first.

ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'admin';
ALTER TABLE api_keys ADD COLUMN prefix text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN revoked_at timestamptz;
CREATE INDEX asks_status ON asks(status, id);
