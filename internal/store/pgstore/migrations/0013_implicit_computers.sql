-- The PostgreSQL form of the SQLite store's 0013_implicit_computers: a
-- Computer made implicitly for a Session is marked implicit, and deleted
-- once nothing uses it. Computers made before it read as explicit.

ALTER TABLE computers ADD COLUMN implicit boolean NOT NULL DEFAULT false;
CREATE INDEX computers_implicit_live ON computers(id) WHERE implicit AND status = 'available';
