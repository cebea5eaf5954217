-- The PostgreSQL form of the SQLite store's 0006_leases: Session leases
-- (which node supervises a Session's process, until expires_at, renewed
-- by that node; expiry is on the database's clock), the node a process
-- record belongs to, and deployment binaries kept in the database so that
-- every node can launch every Deployment.
--
-- Nodes also learn of each other's changes here: every appended event,
-- and every Command change, is announced on the channel "helmr" when its
-- transaction commits. A payload is "e|NODE|SESSION|KIND|TURN" for an
-- event and "c|NODE|COMMAND" for a Command, NODE being the writer's
-- helmr.node setting (each node sets it on its connections) so that a
-- node can skip its own notices.

CREATE TABLE session_leases (
  session_id text COLLATE "C" PRIMARY KEY,
  node_id    text COLLATE "C" NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX session_leases_node ON session_leases(node_id);

ALTER TABLE processes ADD COLUMN node_id text COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE deployment_binaries (
  digest text COLLATE "C" PRIMARY KEY,
  data   bytea NOT NULL
);

CREATE FUNCTION helmr_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('helmr', 'e|' || coalesce(current_setting('helmr.node', true), '') || '|' ||
    NEW.session_id || '|' || NEW.kind || '|' || NEW.turn_id);
  RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION helmr_notify_event();

CREATE FUNCTION helmr_notify_command() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('helmr', 'c|' || coalesce(current_setting('helmr.node', true), '') || '|' || NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER commands_notify AFTER INSERT OR UPDATE ON commands FOR EACH ROW EXECUTE FUNCTION helmr_notify_command();

CREATE FUNCTION helmr_notify_command_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('helmr', 'c|' || coalesce(current_setting('helmr.node', true), '') || '|' || NEW.command_id);
  RETURN NULL;
END $$;
CREATE TRIGGER command_logs_notify AFTER INSERT ON command_logs FOR EACH ROW EXECUTE FUNCTION helmr_notify_command_log();
