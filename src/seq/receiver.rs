//! The receiver's rules as a state machine: `lastSeen[sender]`, stale numbers skipped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a receiver knows of one sender.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub epoch: u64,
    pub last_seen: u64,
}

/// What to do with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Process,
    /// `N <= lastSeen[sender]` in the same epoch, or an older epoch: skip it.
    Stale {
        last_seen: u64,
    },
}

/// One receiver's view of every sender, keyed by role without case (`LEAD`). Serde-ready,
/// so that the engine can keep one per agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receiver {
    pub senders: BTreeMap<String, Seen>,
}

impl Receiver {
    /// Decide on a message from `sender` numbered `seq` (`None`: unnumbered) in `epoch`.
    ///
    /// - missing number, or 0: always processed, state unchanged (backwards compatible);
    /// - unknown sender: starts at epoch 0, lastSeen 0;
    /// - a newer epoch than known (the sender was reset): processed, lastSeen = N;
    /// - an older epoch: stale;
    /// - same epoch: `N <= lastSeen` stale, else processed and lastSeen = N (so after a
    ///   gap, #7 then #5: #5 is stale).
    pub fn receive(&mut self, sender: &str, seq: Option<u64>, epoch: u64) -> Verdict {
        let n = match seq {
            None | Some(0) => return Verdict::Process,
            Some(n) => n,
        };
        let seen = self.senders.entry(sender.to_ascii_uppercase()).or_default();
        if epoch > seen.epoch {
            *seen = Seen { epoch, last_seen: n };
            return Verdict::Process;
        }
        if epoch < seen.epoch || n <= seen.last_seen {
            return Verdict::Stale { last_seen: seen.last_seen };
        }
        seen.last_seen = n;
        Verdict::Process
    }

    /// lastSeen of `sender` (0 when unknown).
    pub fn last_seen(&self, sender: &str) -> u64 {
        self.senders.get(&sender.to_ascii_uppercase()).map_or(0, |s| s.last_seen)
    }

    /// The reference's resolution 1 ("manual clear on restart"): forget everything.
    pub fn reset(&mut self) {
        self.senders.clear();
    }
}
