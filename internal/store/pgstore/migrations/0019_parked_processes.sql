-- The PostgreSQL form of the SQLite store's 0019_parked_processes: a
-- session process parked (checkpointed to disk and ended) keeps its
-- record, so that the node that restores it knows its token and its
-- running Turn is not lost (decision 0024).

ALTER TABLE processes ADD COLUMN parked BOOLEAN NOT NULL DEFAULT false;
