//! squidbot-store: storage adapters for core's ports — SQLite (memories, session
//! index, bulletin cache, job ledger, scheduled jobs, bus journal, approved senders and
//! pairing codes, people: users, usage, approvals and the audit trail), JSONL session
//! tree files, per-context memory documents, the filesystem workspace, channel
//! attachments, the directories of people's and groups' contexts, and the secrets vault.

mod bulletin;
mod bus_journal;
mod channel_access;
mod channel_access_ports;
mod channel_files;
mod database;
mod indexed_sessions;
mod job_ledger;
mod jobs;
mod jsonl;
mod key;
mod key_file;
mod last_active;
mod memory_documents;
mod memory_store;
mod people;
mod session_index;
mod session_search;
mod vault;
mod watched_file;
mod workspace;

pub use bulletin::{Bulletin, BulletinCache};
pub use bus_journal::SqliteBusJournal;
pub use channel_access::{ApprovedSenderRow, ChannelAccessStore, PairingCodeRow};
pub use channel_access_ports::SqliteChannelAccess;
pub use channel_files::{
    ContextDirectories, ContextHeartbeats, ContextSkillPaths, SessionFiles, context_skill_directories,
    context_skill_paths,
};
pub use database::{APPLICATION_ID, Database, DatabaseError, SCHEMA_VERSION};
pub use indexed_sessions::IndexedSessionStore;
pub use job_ledger::{JobLedger, JobRun};
pub use jobs::SqliteJobStore;
pub use jsonl::JsonlSessionStore;
pub use key::{MAX_KEY_BYTES, decode_key, encode_key};
pub use last_active::SqliteLastActive;
pub use memory_documents::FsMemoryDocuments;
pub use memory_store::SqliteMemoryStore;
pub use people::{
    ApprovalListing, ContextPaths, MergeSummary, PurgeSummary, SqliteApprovals, SqliteAudit, SqliteDirectory,
    SqliteUsage, check_user_id, load_or_create_audit_key, merge_context, purge_context,
};
pub use session_index::{
    Activity, ActivityUpdate, RecordedActivity, SessionIndexEntry, SessionStatus, SqliteSessionIndex,
};
pub use session_search::{MAX_SEARCH_HITS, SessionSearchIndex, SyncReport};
pub use vault::{
    MAX_SECRET_NAME_BYTES, VAULT_KEY_BYTES, Vault, VaultEntry, VaultError, VaultKey, VaultKeySource, check_secret_name,
};
#[cfg(feature = "keyring")]
pub use vault::{keyring_label, keyring_reachable};
pub use watched_file::FsWatchedFile;
pub use workspace::{FsWorkspace, MAX_WORKSPACE_FILE_BYTES};
