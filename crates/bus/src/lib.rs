//! squidbot's agent bus, following the SquidRun agent protocol: agents and roles are
//! targets (with aliases); every message carries `(ROLE #N): [TAG] body` with a per-sender
//! sequence; delivery goes to a live route (`delivered.verified` / `accepted.unverified`)
//! or, when none takes it, to a trigger file (`fallback.triggered`) that is delivered when
//! a route is back; targets report health; background workers may message only their
//! owner; running workers are targets of their own ([`WorkerRoutes`]); every attempt is
//! journaled through the [`BusJournal`] port.
//!
//! The crate holds the rules and ports; the only IO it does is the trigger files (std fs).

mod delivery;
pub mod envelope;
mod journal;
mod message;
mod routes;
mod targets;
mod triggers;
mod workers;

pub use delivery::{
    Bus, BusSettings, DeliveryResult, DeliveryStatus, IngestReport, MAX_BODY_BYTES, SendError, SendRequest,
};
pub use envelope::{Envelope, Priority, Sequences};
pub use journal::{BusJournal, DynBusJournal, JournalEntry, JournalError, MemoryJournal};
pub use message::{BusMessage, Sender, USER, new_id};
pub use routes::{Ack, Delivery, DynRoute, Health, HealthReport, Route, RouteError, RouteHandle};
pub use targets::{BUILTIN_ALIASES, BUILTIN_ROLES, Directory, DirectoryError, MAX_NAME_CHARS, normalize};
pub use triggers::{Claim, ClaimedLine, TriggerError, TriggerFiles, TriggerLine, WRITE_GRACE};
pub use workers::{WORKER_OWNER, WorkerRoutes, slot_alias, worker_sender};
