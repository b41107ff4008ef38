-- squidbot schema 7: the sessions of scheduled job runs are known as such, so they can be
-- deleted once older than `sessions.keep_job_runs` (a year of hourly heartbeats would
-- otherwise leave 8,760 session files).

-- The job whose run made the session (its own turn, or the sub-agent a heartbeat
-- delegated to); NULL for every other session.
ALTER TABLE sessions ADD COLUMN job_id TEXT;

CREATE INDEX sessions_job_runs ON sessions (updated_at) WHERE job_id IS NOT NULL;
