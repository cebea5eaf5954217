-- turns.messaged: set once a message was admitted to the Turn, so that
-- starting or settling a Turn without messages does not look for them.
-- Turns not yet settled may have messages from before this column.
ALTER TABLE turns ADD COLUMN messaged boolean NOT NULL DEFAULT false;
UPDATE turns SET messaged = true WHERE status IN ('queued', 'running');

-- turns.interrupt_requested: an interrupt of this one Turn (without a hold)
-- was accepted; a process that reattaches, or a node that missed the
-- notice, stops the Turn.
ALTER TABLE turns ADD COLUMN interrupt_requested boolean NOT NULL DEFAULT false;

-- commands.cancel_requested: a cancel of the Command was accepted; a node
-- that missed the notice stops it when it catches up.
ALTER TABLE commands ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

-- The database marks a message's Turn: InsertMessage relies on it, and so
-- do nodes of an older version during a rolling upgrade.
CREATE FUNCTION helmr_turn_messaged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE turns SET messaged = true WHERE id = NEW.turn_id AND NOT messaged;
  RETURN NULL;
END $$;
CREATE TRIGGER messages_turn_messaged AFTER INSERT ON messages
  FOR EACH ROW EXECUTE FUNCTION helmr_turn_messaged();
