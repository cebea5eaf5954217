-- turns.messaged: set once a message was admitted to the Turn, so that
-- starting or settling a Turn without messages does not look for them.
-- Turns not yet settled may have messages from before this column.
ALTER TABLE turns ADD COLUMN messaged INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET messaged = 1 WHERE status IN ('queued', 'running');
