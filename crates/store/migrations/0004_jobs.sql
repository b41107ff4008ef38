-- squidbot schema 4: the scheduler's job table. User jobs (`squidbot cron add`, the cron
-- tools), heartbeat jobs (generated from HEARTBEAT.md) and system jobs share it so one
-- next-due queue serves all three. Times are milliseconds since the Unix epoch.

CREATE TABLE jobs (
    -- A short random id the user types (`squidbot cron pause ID`).
    id TEXT PRIMARY KEY,
    -- user, heartbeat or system.
    kind TEXT NOT NULL CHECK (kind IN ('user', 'heartbeat', 'system')),
    name TEXT NOT NULL,
    -- The schedule as `--schedule` reads it, so `cron list` output pastes back.
    schedule TEXT NOT NULL,
    -- IANA zone the schedule's wall-clock times are read in.
    timezone TEXT NOT NULL,
    message TEXT NOT NULL,
    -- Where replies go; NULL means the owner's preferred or last active channel.
    channel TEXT,
    -- session, isolated or silent.
    context_mode TEXT NOT NULL DEFAULT 'isolated' CHECK (context_mode IN ('session', 'isolated', 'silent')),
    owner_context TEXT NOT NULL DEFAULT 'owner',
    -- active or paused.
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    -- NULL once a one-shot has run.
    next_run INTEGER,
    last_run INTEGER,
    -- Why the last run failed; NULL after a success.
    last_error TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL,
    -- Hash of the HEARTBEAT.md content a heartbeat job was generated from: a changed
    -- file regenerates its jobs.
    source_hash TEXT,
    -- Seed of a heartbeat cadence's jittered slot, so restarts keep the same slot.
    seed INTEGER
);

CREATE INDEX jobs_due ON jobs (status, next_run);
