-- turns.payload_expired_at: when the history retention dropped the Turn's
-- payloads (input, result, response, its messages' content and the payload
-- fields of its events); NULL while they are kept.
ALTER TABLE turns ADD COLUMN payload_expired_at INTEGER;

-- The settled Turns whose payloads are still kept, oldest settlement
-- first: what the expiry reads in each batch.
CREATE INDEX turns_unexpired ON turns(terminal_at) WHERE payload_expired_at IS NULL AND terminal_at IS NOT NULL;
