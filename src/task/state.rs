//! A task as a transaction sees it: its records and where its message lies.

use super::record::{Checks, OwnerRecord, StatusRecord};
use crate::boxes::Mailbox;

/// A task's records as read (and reconciled) inside its transaction.
#[derive(Debug, Clone)]
pub struct TaskState {
    pub rec: StatusRecord,
    pub owner: Option<OwnerRecord>,
    pub checks: Checks,
    /// Where the task's message lies; `None` when it is in no box.
    pub location: Option<Mailbox>,
}
