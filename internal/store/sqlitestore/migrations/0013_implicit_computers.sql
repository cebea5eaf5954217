-- A Computer made implicitly for a Session (at its first launch, not
-- through POST /v1/computers) is marked implicit: it is deleted once
-- nothing uses it (controlplane.Config.ImplicitComputerGrace). Computers
-- made before this migration read as explicit and are kept.

ALTER TABLE computers ADD COLUMN implicit INTEGER NOT NULL DEFAULT 0;
CREATE INDEX computers_implicit_live ON computers(id) WHERE implicit = 1 AND status = 'available';
