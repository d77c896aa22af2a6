//! The kinds of event. PROTOCOLS.md section 10 lists each with its fields.

use serde::{Deserialize, Serialize};

use crate::task::Move;

/// What an event records. A kind written by a newer circe reads as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A task message was delivered to NEW_MESSAGES and its task opened.
    Open,
    /// A message was delivered to its recipients' INBOXes.
    Send,
    /// circe delivered a message of its own (an escalation, a status update).
    Notify,
    Claim,
    Start,
    Block,
    Unblock,
    Complete,
    Fail,
    Release,
    Requeue,
    Handoff,
    Expire,
    Park,
    /// A check was recorded (`how`: run or asserted).
    Check,
    /// A message moved INBOX -> WORKSPACE.
    Take,
    /// A message moved into LOGS.
    Done,
    /// circe finished or undid what a crashed command left.
    Repair,
    /// An agent was added to the root.
    AgentAdd,
    /// A finished task moved into the archive (`what` names the segment).
    Archive,
    /// A consumer's hook failed too often: the event was set aside.
    DeadLetter,
    /// A deadline passed: a task expired, an ask expired unanswered, or a message was filed.
    Lapse,
    /// A coordinator addressed a waiting task anew.
    Readdress,
    /// circe delivered a message a routing rule sends.
    Route,
    /// An agent was retired.
    Retire,
    /// A message reached a retired agent and is kept as an orphan.
    Orphan,
    /// An orphan was delivered to another agent.
    Redeliver,
    /// A message was imported from a TX folder.
    Import,
    /// A stale message (its number at or below the receiver's lastSeen of its sender) was
    /// skipped: kept where it lies, not shown as new.
    Skip,
    /// A sender's sequence counter or a receiver's lastSeen was set by hand (reset, import).
    Seq,
    #[serde(other)]
    Other,
}

pub const ALL_KINDS: [EventKind; 30] = [
    EventKind::Open,
    EventKind::Send,
    EventKind::Notify,
    EventKind::Claim,
    EventKind::Start,
    EventKind::Block,
    EventKind::Unblock,
    EventKind::Complete,
    EventKind::Fail,
    EventKind::Release,
    EventKind::Requeue,
    EventKind::Handoff,
    EventKind::Expire,
    EventKind::Park,
    EventKind::Check,
    EventKind::Take,
    EventKind::Done,
    EventKind::Repair,
    EventKind::AgentAdd,
    EventKind::Archive,
    EventKind::DeadLetter,
    EventKind::Lapse,
    EventKind::Readdress,
    EventKind::Route,
    EventKind::Retire,
    EventKind::Orphan,
    EventKind::Redeliver,
    EventKind::Import,
    EventKind::Skip,
    EventKind::Seq,
];

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Open => "open",
            EventKind::Send => "send",
            EventKind::Notify => "notify",
            EventKind::Claim => "claim",
            EventKind::Start => "start",
            EventKind::Block => "block",
            EventKind::Unblock => "unblock",
            EventKind::Complete => "complete",
            EventKind::Fail => "fail",
            EventKind::Release => "release",
            EventKind::Requeue => "requeue",
            EventKind::Handoff => "handoff",
            EventKind::Expire => "expire",
            EventKind::Park => "park",
            EventKind::Check => "check",
            EventKind::Take => "take",
            EventKind::Done => "done",
            EventKind::Repair => "repair",
            EventKind::AgentAdd => "agent_add",
            EventKind::Archive => "archive",
            EventKind::DeadLetter => "dead_letter",
            EventKind::Lapse => "lapse",
            EventKind::Readdress => "readdress",
            EventKind::Route => "route",
            EventKind::Retire => "retire",
            EventKind::Orphan => "orphan",
            EventKind::Redeliver => "redeliver",
            EventKind::Import => "import",
            EventKind::Skip => "skip",
            EventKind::Seq => "seq",
            EventKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        ALL_KINDS.into_iter().find(|k| k.as_str() == s)
    }

    /// The event a lifecycle move writes.
    pub fn of_move(mv: Move) -> EventKind {
        match mv {
            Move::Claim => EventKind::Claim,
            Move::Start => EventKind::Start,
            Move::Block => EventKind::Block,
            Move::Unblock => EventKind::Unblock,
            Move::Complete => EventKind::Complete,
            Move::Fail => EventKind::Fail,
            Move::Release => EventKind::Release,
            Move::Handoff => EventKind::Handoff,
            Move::Expire => EventKind::Expire,
            Move::Park => EventKind::Park,
            Move::Requeue => EventKind::Requeue,
            Move::Lapse => EventKind::Lapse,
            Move::Readdress => EventKind::Readdress,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in ALL_KINDS {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
        for mv in crate::task::lifecycle::ALL_MOVES {
            assert_eq!(EventKind::of_move(mv).as_str(), mv.as_str());
        }
    }

    /// PROTOCOLS.md section 10's table names every kind.
    #[test]
    fn protocols_lists_every_kind() {
        let doc = include_str!("../../PROTOCOLS.md");
        let table = &doc[doc.find("## 10. The event log").unwrap()..doc.find("## 11.").unwrap()];
        for k in ALL_KINDS {
            let named = table.lines().any(|l| {
                l.starts_with('|')
                    && l.split('|').nth(1).is_some_and(|c| c.contains(&format!("`{}`", k.as_str())))
            });
            assert!(named, "PROTOCOLS.md section 10 has no row for `{}`", k.as_str());
        }
    }
}
