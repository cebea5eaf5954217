-- turns.messaged: set once a message was admitted to the Turn, so that
-- starting or settling a Turn without messages does not look for them.
-- Turns not yet settled may have messages from before this column.
ALTER TABLE turns ADD COLUMN messaged boolean NOT NULL DEFAULT false;
UPDATE turns SET messaged = true WHERE status IN ('queued', 'running');
