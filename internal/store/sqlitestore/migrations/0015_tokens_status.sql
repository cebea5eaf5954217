-- The inbox (GET /v1/tokens) lists Tokens by status, newest first.

CREATE INDEX tokens_status ON tokens(status, id);
