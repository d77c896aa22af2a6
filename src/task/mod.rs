//! Tasks: the records, the lifecycle table, and every operation that changes a task.
//!
//! Each operation runs under the task's lock, first reconciles the records with where the
//! task's message really lies (finishing what a crashed command began), then asks the
//! lifecycle table, then commits with one rename (PROTOCOLS.md "Crash safety").

mod event;
pub mod lifecycle;
mod announce;
mod claim;
mod open;
mod update;
mod queue;
pub mod record;
mod state;

pub use event::Event;
pub use lifecycle::{Move, Status};
pub use claim::{ClaimOutcome, claim, claim_next, reap};
pub use open::{OpenOutcome, OpenSpec, open_task};
pub use update::{CheckRun, check_run, check_set, heartbeat, release, set_status};
pub use state::load_reconciled;
pub use queue::rebuild as rebuild_queue;
pub use record::{Checks, OwnerRecord, StatusRecord};
pub use state::{TaskState, load, locate};

/// This machine's host name, for `.owner` records.
pub fn host() -> String {
    crate::store::host_name()
}
