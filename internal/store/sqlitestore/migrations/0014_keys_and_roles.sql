-- API keys get a role (admin, operator, responder, viewer), the first
-- characters of their secret for recognition, and a revocation time. Keys
-- made before this migration are admin keys (they could do everything)
-- with no prefix. The inbox (GET /v1/asks) lists questions by status,
-- newest first.

ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE api_keys ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;
CREATE INDEX asks_status ON asks(status, id);
