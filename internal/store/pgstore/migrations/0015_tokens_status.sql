-- The PostgreSQL form of the SQLite store's 0015_tokens_status: the inbox
-- (GET /v1/tokens) lists Tokens by status, newest first.

CREATE INDEX tokens_status ON tokens(status, id);
