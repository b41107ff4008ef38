//! Short random ids for sessions and entries.

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
