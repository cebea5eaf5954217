-- A session process parked: checkpointed to disk (its images in its
-- Computer's directory) and ended. Its record stays, so that the node that
-- restores it (after a restart, or another node sharing the Computers)
-- knows its token, and its running Turn is not lost (decision 0024).

ALTER TABLE processes ADD COLUMN parked INTEGER NOT NULL DEFAULT 0;
