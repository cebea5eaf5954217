-- turns.messaged: set once a message was admitted to the Turn, so that
-- starting or settling a Turn without messages does not look for them.
-- Turns not yet settled may have messages from before this column.
ALTER TABLE turns ADD COLUMN messaged INTEGER NOT NULL DEFAULT 0;
UPDATE turns SET messaged = 1 WHERE status IN ('queued', 'running');

-- turns.interrupt_requested: an interrupt of this one Turn (without a hold)
-- was accepted; a process that reattaches, or a node that missed the
-- notice, stops the Turn.
ALTER TABLE turns ADD COLUMN interrupt_requested INTEGER NOT NULL DEFAULT 0;

-- commands.cancel_requested: a cancel of the Command was accepted; a node
-- that missed the notice stops it when it catches up.
ALTER TABLE commands ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
