//! Tasks: the records, the lifecycle table, and every operation that changes a task.
//!
//! Each operation runs under the task's lock, first reconciles the records with where the
//! task's message really lies (finishing what a crashed command began), then asks the
//! lifecycle table, then commits with one rename (PROTOCOLS.md "Crash safety").

mod announce;
pub mod board;
mod claim;
mod event;
pub mod lifecycle;
mod open;
mod queue;
pub mod record;
mod state;
mod update;

pub use claim::{ClaimOutcome, claim, claim_next, reap};
pub use event::Event;
pub use lifecycle::{Move, Status};
pub use open::{OpenOutcome, OpenSpec, open_task};
pub use queue::rebuild as rebuild_queue;
pub use record::{Checks, OwnerRecord, StatusRecord};
pub use state::load_reconciled;
pub use state::{TaskState, load, locate};
pub use update::{CheckRun, check_run, check_set, heartbeat, release, set_status};

/// This machine's host name, for `.owner` records.
pub fn host() -> String {
    crate::store::host_name()
}
