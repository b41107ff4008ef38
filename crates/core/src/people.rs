//! People: users with roles, their budgets, the tool calls that wait for an admin, the
//! usage ledger and the audit trail. The policy is here, enforced by the agent loop
//! around every model and tool call; the stores are ports (`ports`), kept by the
//! database in the gateway and in memory in tests (`memory`).

pub mod audit;
mod audit_trail;
pub mod budget;
mod glob;
pub mod memory;
pub mod ports;
pub mod prices;
pub mod roles;
pub mod rules;
mod service;
pub mod tokens;

pub use audit_trail::{ACTOR_DETAIL, AuditTrail};
pub use glob::matches as glob_matches;
pub use ports::{ApprovalStore, AuditLog, Directory, PeopleStoreError, UsageGrouping, UsageLedger, UsageSubject};
pub use roles::{RoleBook, RolePolicy};
pub use rules::ApprovalRules;
pub use service::{Admission, DecideError, OWNER_CONTEXT, People, PeopleNotifier, PeopleSettings, PeopleStores};
