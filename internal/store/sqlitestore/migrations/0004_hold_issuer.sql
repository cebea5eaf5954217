-- The Session whose runtime MCP interrupt_session placed a hold: only it
-- may resume that hold through runtime MCP.

ALTER TABLE holds ADD COLUMN issuer_session_id TEXT NOT NULL DEFAULT '';
