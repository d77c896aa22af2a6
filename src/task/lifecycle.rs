//! The task state machine: the one transition table circe has. PROTOCOLS.md "Lifecycle"
//! mirrors `TABLE`; `decide` answers whether a move is allowed, and `effects::apply` (which
//! asks `decide`) says what the move changes. No other code re-decides.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    New,
    Claimed,
    InProgress,
    Blocked,
    Completed,
    Failed,
    Parked,
    /// Its deadline passed before it was completed (`circe reap`): terminal.
    Expired,
}

pub const ALL_STATUSES: [Status; 8] = [
    Status::New,
    Status::Claimed,
    Status::InProgress,
    Status::Blocked,
    Status::Completed,
    Status::Failed,
    Status::Parked,
    Status::Expired,
];

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Claimed => "claimed",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Parked => "parked",
            Status::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        ALL_STATUSES.into_iter().find(|st| st.as_str() == s || st.as_str().replace('_', "-") == s)
    }

    /// Held by an owner (a lease runs).
    pub fn is_owned(self) -> bool {
        matches!(self, Status::Claimed | Status::InProgress | Status::Blocked)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Expired)
    }
}

/// A named move between statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Move {
    Claim,
    Start,
    Block,
    Unblock,
    Complete,
    Fail,
    Release,
    Handoff,
    Expire,
    Park,
    Requeue,
    /// The task's deadline passed: it ends `expired`.
    Lapse,
    /// A coordinator addresses a waiting task anew (an orphan of a retired agent).
    Readdress,
}

pub const ALL_MOVES: [Move; 13] = [
    Move::Claim,
    Move::Start,
    Move::Block,
    Move::Unblock,
    Move::Complete,
    Move::Fail,
    Move::Release,
    Move::Handoff,
    Move::Expire,
    Move::Park,
    Move::Requeue,
    Move::Lapse,
    Move::Readdress,
];

impl Move {
    /// What the move does, in the words `circe status` takes (for messages).
    pub fn target_word(self) -> &'static str {
        match self {
            Move::Claim => "claimed (circe claim)",
            Move::Start | Move::Unblock => "in_progress",
            Move::Block => "blocked",
            Move::Complete => "completed",
            Move::Fail => "failed",
            Move::Release => "new (a release)",
            Move::Handoff => "new (a handoff)",
            Move::Expire => "new (an expiry)",
            Move::Park => "parked",
            Move::Requeue => "new (a requeue)",
            Move::Lapse => "expired (a passed deadline)",
            Move::Readdress => "new (readdressed)",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Move::Claim => "claim",
            Move::Start => "start",
            Move::Block => "block",
            Move::Unblock => "unblock",
            Move::Complete => "complete",
            Move::Fail => "fail",
            Move::Release => "release",
            Move::Handoff => "handoff",
            Move::Expire => "expire",
            Move::Park => "park",
            Move::Requeue => "requeue",
            Move::Lapse => "lapse",
            Move::Readdress => "readdress",
        }
    }
}

/// Who is asking, as the table sees it. One agent can be several at once
/// (the owner who is also a coordinator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Actor {
    /// An agent the registry and the message's `to` allow to take the task.
    Eligible,
    /// The agent holding the task (name and epoch checked under the task lock).
    Owner,
    /// An agent with role coordinator or rooster.
    Coordinator,
    /// The lease ran out (any command noticing it, or `circe reap`).
    Lease,
    /// The task's deadline passed (`circe reap`).
    Deadline,
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Eligible => "eligible agent",
            Actor::Owner => "owner",
            Actor::Coordinator => "coordinator",
            Actor::Lease => "lease expiry",
            Actor::Deadline => "deadline passed",
        }
    }
}

/// One row: `mv` takes a task in any of `from` to `to`, if the caller is one of `by`.
pub struct Rule {
    pub from: &'static [Status],
    pub mv: Move,
    pub to: Status,
    pub by: &'static [Actor],
}

use Actor::{Coordinator, Deadline, Eligible, Lease, Owner};
use Status::{Blocked, Claimed, Completed, Expired, Failed, InProgress, New, Parked};

/// The lifecycle. Anything not here is refused.
pub const TABLE: &[Rule] = &[
    Rule { from: &[New], mv: Move::Claim, to: Claimed, by: &[Eligible] },
    Rule { from: &[Claimed], mv: Move::Start, to: InProgress, by: &[Owner] },
    Rule { from: &[InProgress], mv: Move::Block, to: Blocked, by: &[Owner] },
    Rule { from: &[Blocked], mv: Move::Unblock, to: InProgress, by: &[Owner] },
    Rule { from: &[InProgress], mv: Move::Complete, to: Completed, by: &[Owner] },
    Rule {
        from: &[Claimed, InProgress, Blocked],
        mv: Move::Complete,
        to: Completed,
        by: &[Coordinator],
    },
    Rule { from: &[InProgress], mv: Move::Fail, to: Failed, by: &[Owner] },
    Rule {
        from: &[Claimed, InProgress, Blocked],
        mv: Move::Release,
        to: New,
        by: &[Owner, Coordinator],
    },
    Rule { from: &[Claimed, InProgress, Blocked], mv: Move::Handoff, to: New, by: &[Owner] },
    Rule { from: &[Claimed, InProgress, Blocked], mv: Move::Expire, to: New, by: &[Lease] },
    Rule { from: &[Claimed, InProgress, Blocked], mv: Move::Park, to: Parked, by: &[Lease] },
    Rule { from: &[Parked], mv: Move::Requeue, to: New, by: &[Coordinator] },
    Rule { from: &[Parked], mv: Move::Fail, to: Failed, by: &[Coordinator] },
    Rule {
        from: &[New, Claimed, InProgress, Blocked, Parked],
        mv: Move::Lapse,
        to: Expired,
        by: &[Deadline],
    },
    Rule { from: &[New, Parked], mv: Move::Readdress, to: New, by: &[Coordinator] },
];

/// Is `r` a move one of `actors` makes (not the lease's or the deadline's own)?
fn theirs_any(r: &Rule, actors: &[Actor]) -> bool {
    r.by.iter().any(|a| actors.contains(a) && !matches!(a, Actor::Lease | Actor::Deadline))
}

/// The status `mv` leads to from `from` when made by one of `actors`, or a refusal.
pub fn decide(from: Status, mv: Move, actors: &[Actor]) -> Result<Status> {
    let rows: Vec<&Rule> = TABLE.iter().filter(|r| r.mv == mv && r.from.contains(&from)).collect();
    if rows.is_empty() && from.is_terminal() {
        // Nothing leads out of a final status: said so, not which statuses the move needs.
        let why = match from {
            Expired => " (its deadline passed)",
            _ => "",
        };
        // The way on is said by `effects::apply`, to the agent that asked.
        return Err(Error::refused(format!(
            "cannot move a task that is {} to {}: {} is final{why}",
            from.as_str(),
            mv.target_word(),
            from.as_str()
        )));
    }
    if rows.is_empty() {
        // The statuses this move starts from for these actors (for anyone, when none of
        // its rows is theirs), each once.
        let theirs = |r: &&Rule| r.mv == mv && r.by.iter().any(|a| actors.contains(a));
        let anyone = !TABLE.iter().any(|r| theirs(&r));
        let mut allowed: Vec<&str> = Vec::new();
        for s in TABLE.iter().filter(|r| r.mv == mv && (anyone || theirs(r))).flat_map(|r| r.from) {
            if !allowed.contains(&s.as_str()) {
                allowed.push(s.as_str());
            }
        }
        // And, for a held task, what these actors may do to it instead (a coordinator: complete
        // it, or release it back to the queue).
        let mut instead: Vec<&str> = Vec::new();
        for r in TABLE.iter().filter(|r| r.from.contains(&from) && theirs_any(r, actors)) {
            if !instead.contains(&r.mv.target_word()) && r.mv != Move::Claim {
                instead.push(r.mv.target_word());
            }
        }
        let instead = if anyone || instead.is_empty() || !from.is_owned() {
            String::new()
        } else {
            format!("; a task that is {} you may move to {}", from.as_str(), instead.join(" or "))
        };
        return Err(Error::refused(format!(
            "cannot move a task that is {} to {}",
            from.as_str(),
            mv.target_word()
        ))
        .hint(format!(
            "{} applies to tasks that are {}{instead}",
            mv.target_word(),
            allowed.join(" or ")
        )));
    }
    for r in &rows {
        if r.by.iter().any(|a| actors.contains(a)) {
            return Ok(r.to);
        }
    }
    let who: Vec<&str> = rows.iter().flat_map(|r| r.by.iter().map(|a| a.as_str())).collect();
    let err = Error::refused(format!(
        "only the {} may move a task that is {} to {}",
        who.join(" or "),
        from.as_str(),
        mv.target_word()
    ));
    Err(match way_round(from, mv, actors) {
        Some(mid) => {
            err.hint(format!("move it to {} first, then to {}", mid.as_str(), mv.target_word()))
        }
        None => err,
    })
}

/// A way round a refusal of `mv` from `from` for these actors: the status one move of
/// theirs leads to first, after which `mv` is theirs to make.
pub fn way_round(from: Status, mv: Move, actors: &[Actor]) -> Option<Status> {
    let theirs = |r: &Rule| r.by.iter().any(|a| actors.contains(a));
    TABLE.iter().filter(|r| r.from.contains(&from) && theirs(r) && r.to != from).find_map(|first| {
        let then = TABLE.iter().any(|r| r.mv == mv && r.from.contains(&first.to) && theirs(r));
        then.then_some(first.to)
    })
}

/// The move `circe status <task> <target>` means for a task that is `from`.
pub fn move_to(from: Status, target: Status) -> Result<Move> {
    let mv = match target {
        InProgress if from == Blocked => Move::Unblock,
        InProgress => Move::Start,
        Blocked => Move::Block,
        Completed => Move::Complete,
        Failed => Move::Fail,
        New => Move::Release,
        Claimed => {
            return Err(Error::refused(
                "a task becomes claimed by `circe claim`, not by `circe status`",
            )
            .hint("run `circe claim <task>`"));
        }
        Parked => {
            return Err(Error::refused("only an expired lease parks a task").hint(
                "`circe status TASK blocked` says it waits on something; `circe release TASK` gives it back",
            ));
        }
        Expired => {
            return Err(Error::refused("only a passed deadline expires a task")
                .hint("`circe reap` expires tasks whose deadline passed"));
        }
    };
    Ok(mv)
}

/// The table as Markdown rows, as PROTOCOLS.md shows it.
pub fn markdown_rows() -> String {
    let mut out = String::new();
    for r in TABLE {
        let from: Vec<&str> = r.from.iter().map(|s| s.as_str()).collect();
        let by: Vec<&str> = r.by.iter().map(|a| a.as_str()).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            from.join(", "),
            r.mv.as_str(),
            r.to.as_str(),
            by.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused move's hint names each status it starts from once, for the actor asking.
    #[test]
    fn a_refusal_names_the_statuses_the_move_starts_from_for_its_actor() {
        let hint = |actors: &[Actor]| decide(New, Move::Complete, actors).unwrap_err().hint;
        assert_eq!(
            hint(&[Owner]).as_deref(),
            Some("completed applies to tasks that are in_progress")
        );
        assert_eq!(
            hint(&[Coordinator]).as_deref(),
            Some("completed applies to tasks that are claimed or in_progress or blocked")
        );
        assert_eq!(
            hint(&[Lease]).as_deref(),
            Some("completed applies to tasks that are in_progress or claimed or blocked")
        );
        // A held task: what the actor may do to it instead.
        assert_eq!(
            decide(Blocked, Move::Fail, &[Coordinator]).unwrap_err().hint.as_deref(),
            Some(
                "failed applies to tasks that are parked; a task that is blocked you may move to completed or new (a release)"
            )
        );
        // Out of a final status nothing leads: said so (the way on is `effects::apply`'s,
        // said to the agent that asked: tests/cli `hints_of_lifecycle_refusals_...`).
        for (from, ends) in [
            (Completed, "completed is final"),
            (Failed, "failed is final"),
            (Expired, "expired is final (its deadline passed)"),
        ] {
            let e = decide(from, Move::Complete, &[Owner]).unwrap_err();
            assert!(e.message.ends_with(ends), "{}", e.message);
        }
    }

    /// PROTOCOLS.md must show exactly this table.
    #[test]
    fn protocols_mirrors_table() {
        let doc = include_str!("../../PROTOCOLS.md");
        assert!(
            doc.contains(&markdown_rows()),
            "PROTOCOLS.md section 7 differs from TABLE:\n{}",
            markdown_rows()
        );
    }

    const ACTOR_SETS: [&[Actor]; 6] =
        [&[Eligible], &[Owner], &[Coordinator], &[Lease], &[Deadline], &[Owner, Coordinator]];

    /// Every status x every move x every actor: allowed exactly when a row says so, and
    /// then to the row's target.
    #[test]
    fn exhaustive_table() {
        let mut allowed = 0;
        for from in ALL_STATUSES {
            for mv in ALL_MOVES {
                for actors in ACTOR_SETS {
                    let expect = TABLE
                        .iter()
                        .find(|r| {
                            r.mv == mv
                                && r.from.contains(&from)
                                && r.by.iter().any(|a| actors.contains(a))
                        })
                        .map(|r| r.to);
                    match (decide(from, mv, actors), expect) {
                        (Ok(to), Some(e)) => {
                            assert_eq!(to, e);
                            allowed += 1;
                        }
                        (Err(err), None) => assert_eq!(err.kind, crate::error::Kind::Refused),
                        (got, want) => {
                            panic!("{from:?} {mv:?} by {actors:?}: got {got:?}, want {want:?}")
                        }
                    }
                }
            }
        }
        // A fixed count, so that widening the table by accident fails here.
        assert_eq!(allowed, 50);
    }

    #[test]
    fn terminal_states_are_final() {
        for from in [Completed, Failed, Expired] {
            for mv in ALL_MOVES {
                assert!(
                    decide(from, mv, &[Eligible, Owner, Coordinator, Lease, Deadline]).is_err(),
                    "{from:?} {mv:?}"
                );
            }
        }
    }

    #[test]
    fn spec_path() {
        let mut s = New;
        for (mv, who) in [
            (Move::Claim, Eligible),
            (Move::Start, Owner),
            (Move::Block, Owner),
            (Move::Unblock, Owner),
            (Move::Complete, Owner),
        ] {
            s = decide(s, mv, &[who]).unwrap();
        }
        assert_eq!(s, Completed);
        assert!(
            decide(New, Move::Claim, &[Owner]).is_err(),
            "an owner of nothing cannot claim without eligibility"
        );
        assert!(
            decide(Claimed, Move::Complete, &[Owner]).is_err(),
            "completion needs in_progress first"
        );
        assert_eq!(move_to(Blocked, InProgress).unwrap(), Move::Unblock);
        assert!(move_to(New, Claimed).is_err());
    }
}
