//! The receiver's rules as a state machine: `lastSeen[sender]`, stale numbers skipped.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What a receiver knows of one sender.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub epoch: u64,
    pub last_seen: u64,
    /// The message that set `last_seen`, when known: that message itself is not stale
    /// (it was handed on, and may still lie in the INBOX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<String>,
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
    #[serde(default)]
    pub senders: BTreeMap<String, Seen>,
    /// Stale messages already logged as skipped (their ids), so that each is logged once.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub skipped: BTreeSet<String>,
    /// Messages handed on from the INBOX (a watcher, a wait) that may still lie there (their
    /// ids, by sender as `senders` keys them): seen, so never stale, however far lastSeen
    /// moved past them since.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub handed: BTreeMap<String, BTreeSet<String>>,
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
        self.receive_msg(sender, seq, epoch, None)
    }

    /// `receive`, remembering which message moved lastSeen (`msg_id`). The message that
    /// set lastSeen, received again, is processed and changes nothing: handing a message on
    /// twice (taken, then done) is not a duplicate.
    pub fn receive_msg(
        &mut self,
        sender: &str,
        seq: Option<u64>,
        epoch: u64,
        msg_id: Option<&str>,
    ) -> Verdict {
        let verdict = self.judge(sender, seq, epoch, msg_id);
        if let (Verdict::Process, Some(n)) = (verdict, seq.filter(|n| *n > 0)) {
            let seen = self.senders.entry(sender.to_ascii_uppercase()).or_default();
            if epoch > seen.epoch || n > seen.last_seen {
                *seen = Seen { epoch, last_seen: n, msg_id: msg_id.map(str::to_string) };
            }
        }
        verdict
    }

    /// `receive_msg` of a message a consumer handed on from the INBOX, where it stays: it is
    /// remembered as seen (`handed`), never stale afterwards.
    pub fn hand_on(&mut self, sender: &str, seq: Option<u64>, epoch: u64, msg_id: &str) -> Verdict {
        let verdict = self.receive_msg(sender, seq, epoch, Some(msg_id));
        if verdict == Verdict::Process {
            self.handed.entry(sender.to_ascii_uppercase()).or_default().insert(msg_id.to_string());
        }
        verdict
    }

    /// The verdict `receive_msg` would give, changing nothing (a listing marks stale
    /// messages without handing anything on).
    pub fn judge(
        &self,
        sender: &str,
        seq: Option<u64>,
        epoch: u64,
        msg_id: Option<&str>,
    ) -> Verdict {
        let n = match seq {
            None | Some(0) => return Verdict::Process,
            Some(n) => n,
        };
        let Some(seen) = self.senders.get(&sender.to_ascii_uppercase()) else {
            return Verdict::Process;
        };
        // Handed on from the INBOX already: seen, whatever came after it.
        let handed = self.handed.get(&sender.to_ascii_uppercase());
        if msg_id.is_some_and(|id| handed.is_some_and(|h| h.contains(id))) {
            return Verdict::Process;
        }
        let same = msg_id.is_some() && msg_id == seen.msg_id.as_deref();
        if epoch > seen.epoch || (epoch == seen.epoch && (n > seen.last_seen || same)) {
            return Verdict::Process;
        }
        Verdict::Stale { last_seen: seen.last_seen }
    }

    /// Message `msg_id` of `sender` was redelivered into the INBOX (an orphan a coordinator
    /// handed on): new to this receiver whatever its number, so it is remembered with the
    /// handed-on ones, never stale while it lies there. lastSeen does not move.
    pub fn redelivered(&mut self, sender: &str, msg_id: &str) {
        self.handed.entry(sender.to_ascii_uppercase()).or_default().insert(msg_id.to_string());
    }

    /// Keep of `sender`'s handed-on messages only those `still` (lying in the INBOX), and of
    /// any sender's when `sender` is `None`; drop the ones that left.
    pub fn keep_handed(&mut self, sender: Option<&str>, still: &dyn Fn(&str) -> bool) {
        for (s, ids) in &mut self.handed {
            if sender.is_none_or(|w| w.eq_ignore_ascii_case(s)) {
                ids.retain(|id| still(id));
            }
        }
        self.handed.retain(|_, ids| !ids.is_empty());
    }

    /// lastSeen of `sender` (0 when unknown).
    pub fn last_seen(&self, sender: &str) -> u64 {
        self.senders.get(&sender.to_ascii_uppercase()).map_or(0, |s| s.last_seen)
    }

    /// The reference's resolution 1 ("manual clear on restart"): forget everything.
    pub fn reset(&mut self) {
        self.senders.clear();
        self.skipped.clear();
        self.handed.clear();
    }
}
