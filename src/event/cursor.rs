//! A reader's position in the event log: the id of the last event it has handed on.
//!
//! Ids are gap-free, so "after id N" names the next event exactly, in the current log file
//! or in any rotated segment (PROTOCOLS.md section 10, "Cursors and rotation").

use serde::{Deserialize, Serialize};

/// Read from the event after `after` (0: from the first event).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Cursor {
    pub after: u64,
}

impl Cursor {
    pub const START: Cursor = Cursor { after: 0 };

    pub fn after(id: u64) -> Cursor {
        Cursor { after: id }
    }

    /// The id of the next event to read.
    pub fn next_id(self) -> u64 {
        self.after.saturating_add(1)
    }
}
