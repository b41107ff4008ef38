//! squidbot-store: storage adapters for core's ports — JSONL session tree files and the
//! filesystem workspace.

mod jsonl;
mod key;
mod workspace;

pub use jsonl::JsonlSessionStore;
pub use key::{MAX_KEY_BYTES, decode_key, encode_key};
pub use workspace::{FsWorkspace, MAX_WORKSPACE_FILE_BYTES};
