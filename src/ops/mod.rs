//! The operations circe offers, written against the engine seam: sending, claiming, moving a
//! task through its lifecycle, filing messages. Each task operation runs in one task
//! transaction and commits one `Change` the task model computed.

pub mod archive;
mod claim;
pub mod doctor;
mod find;
pub mod hook;
mod notify;
mod open;
mod read;
mod send;
pub mod stream;
mod update;
pub mod wait;

pub use claim::{ClaimOutcome, claim, claim_next, claim_with, reap};
pub use find::{Found, done, find, find_in, messages_of, take};
pub use open::OpenOutcome;
pub use read::{first_problem, read};
pub use send::{DeliveredCopy, Delivery, send};
pub use update::{CheckRun, check_run, check_set, heartbeat, release, set_status};

#[cfg(test)]
mod tests;
