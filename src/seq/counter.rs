//! A sender's own counter: one per sender whatever the recipient (broadcasts included).

use serde::{Deserialize, Serialize};

/// The last number sent, in an epoch. A reset starts a new epoch at 0, so the next number
/// is #1 again and receivers can tell it from a stale #1 of the old epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub epoch: u64,
    pub last: u64,
}

impl Counter {
    /// Increment before sending (the reference's rule 2), and return the number to send.
    pub fn next_seq(&mut self) -> u64 {
        self.last += 1;
        self.last
    }

    /// A manual reset: numbering starts again at #1 in the next epoch. `None` (nothing
    /// changed) when the epoch is at its end: an epoch that came round to 0 again would make
    /// every message the sender numbers stale to its receivers.
    pub fn reset(&mut self) -> Option<()> {
        self.epoch = self.epoch.checked_add(1)?;
        self.last = 0;
        Some(())
    }
}
