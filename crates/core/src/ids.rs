//! Short random ids for sessions, entries, correlation, sub-agents and scheduled jobs.

/// A 12-hex-character random id, unique enough within one session file.
pub fn entry_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(12);
    id
}

/// A full random id for a session.
pub fn session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A random id tying together everything one inbound message causes.
pub fn correlation_id() -> String {
    entry_id()
}

/// A short random id for a sub-agent, easy for a model to repeat.
pub fn worker_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

/// A short random id for a scheduled job, typed by people (`squidbot cron pause ID`).
pub fn job_id() -> String {
    worker_id()
}
