-- squidbot schema 5: what the scheduler engine needs from the job table.

-- `HH:MM-HH:MM` in the job's zone outside which runs are skipped; NULL means any time.
ALTER TABLE jobs ADD COLUMN active_hours TEXT;

-- One row counting every insert, update and delete of `jobs`, by any process: a running
-- scheduler reads it at each poll to notice `squidbot cron add/pause/...` made by the
-- CLI without re-reading the whole table. Triggers keep it, so no writer can forget.
CREATE TABLE job_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);

INSERT INTO job_revision (id, revision) VALUES (1, 0);

CREATE TRIGGER jobs_revision_after_insert AFTER INSERT ON jobs
BEGIN
    UPDATE job_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER jobs_revision_after_update AFTER UPDATE ON jobs
BEGIN
    UPDATE job_revision SET revision = revision + 1 WHERE id = 1;
END;

CREATE TRIGGER jobs_revision_after_delete AFTER DELETE ON jobs
BEGIN
    UPDATE job_revision SET revision = revision + 1 WHERE id = 1;
END;

-- Heartbeat and system jobs are replaced per kind and owner context.
CREATE INDEX jobs_generated ON jobs (kind, owner_context);
