-- tokens.schema: the JSON Schema a completion must satisfy, from the
-- Token's latest wait that gave one; NULL accepts any JSON.
ALTER TABLE tokens ADD COLUMN schema BLOB;
