//! squidbot-store: storage adapters for core's ports — SQLite (memories, session
//! index, bulletin cache, job ledger, scheduled jobs, bus journal), JSONL session tree files, per-context memory
//! documents and the filesystem workspace.

mod bulletin;
mod bus_journal;
mod channel_access;
mod database;
mod job_ledger;
mod jobs;
mod jsonl;
mod key;
mod memory_documents;
mod memory_store;
mod session_index;
mod workspace;

pub use bulletin::{Bulletin, BulletinCache};
pub use bus_journal::SqliteBusJournal;
pub use channel_access::{ApprovedSenderRow, ChannelAccessStore, PairingCodeRow};
pub use database::{APPLICATION_ID, Database, DatabaseError, SCHEMA_VERSION};
pub use job_ledger::{JobLedger, JobRun};
pub use jobs::SqliteJobStore;
pub use jsonl::JsonlSessionStore;
pub use key::{MAX_KEY_BYTES, decode_key, encode_key};
pub use memory_documents::FsMemoryDocuments;
pub use memory_store::SqliteMemoryStore;
pub use session_index::{
    Activity, ActivityUpdate, RecordedActivity, SessionIndexEntry, SessionStatus, SqliteSessionIndex,
};
pub use workspace::{FsWorkspace, MAX_WORKSPACE_FILE_BYTES};
