//! The effects, tested like the table: every status x move x actor.

use std::time::Duration;

use super::*;
use crate::names::TaskId;
use crate::task::lifecycle::{ALL_MOVES, ALL_STATUSES, TABLE};
use crate::task::record::BASE_FORMAT;

fn agent(s: &str) -> AgentName {
    AgentName::new(s).unwrap()
}

fn now() -> DateTime<Utc> {
    clock::parse("2025-11-21T17:00:00Z").unwrap()
}

/// A task in `status`: held by o1 (lease 10 minutes ahead) when owned or finished.
fn state(status: Status) -> TaskState {
    let held = status.is_owned() || status.is_terminal();
    let rec = StatusRecord {
        v: BASE_FORMAT,
        task_id: TaskId::new("T-1").unwrap(),
        status,
        owner: held.then(|| agent("o1")),
        started_at: None,
        updated_at: "2025-11-21T16:00:00Z".into(),
        created_at: "2025-11-21T16:00:00Z".into(),
        intent: "implement_feature".into(),
        priority: "high".into(),
        to: "all".into(),
        opened_by: "c1".into(),
        epoch: 4,
        attempts: 2,
        expiries: 1,
        message: "m.md".into(),
        lease_expires_at: status.is_owned().then(|| "2025-11-21T17:10:00Z".into()),
        note: None,
        handoff: None,
        handoff_checks: Vec::new(),
        deadline: None,
        outbox: Vec::new(),
        asserted: Vec::new(),
    };
    let location = if held { Mailbox::Inbox(agent("o1")) } else { Mailbox::NewMessages };
    let mut checks = Checks::new();
    checks.insert(CheckName::new("tests_passed").unwrap(), true);
    TaskState { rec, owner: None, checks, location: Some(location) }
}

fn handoff() -> Handoff {
    Handoff {
        name: "h.md".into(),
        content: b"x".to_vec(),
        intent: "test".into(),
        to: "qa".into(),
        priority: None,
        deadline: None,
        required_checks: vec![CheckName::new("tests_passed").unwrap()],
    }
}

const ACTOR_SETS: [&[Actor]; 6] = [
    &[Actor::Eligible],
    &[Actor::Owner],
    &[Actor::Coordinator],
    &[Actor::Lease],
    &[Actor::Deadline],
    &[Actor::Owner, Actor::Coordinator],
];

fn by(actors: &[Actor]) -> &'static str {
    if actors.contains(&Actor::Owner) {
        "o1"
    } else if actors.contains(&Actor::Coordinator) {
        "c1"
    } else {
        "e1"
    }
}

/// Every status x move x actor: `apply` allows exactly what the table allows, and then the
/// change keeps every invariant of a record.
#[test]
fn exhaustive_effects() {
    let h = handoff();
    let mut allowed = 0;
    for from in ALL_STATUSES {
        for mv in ALL_MOVES {
            for actors in ACTOR_SETS {
                let mut st = state(from);
                if mv == Move::Lapse {
                    // Only a task whose deadline passed lapses.
                    st.rec.deadline = Some("2025-11-21T16:30:00Z".into());
                }
                let ctx = MoveCtx {
                    by: by(actors),
                    actors,
                    now: now(),
                    lease: Duration::from_secs(600),
                    note: Some("n"),
                    forced: false,
                    handoff: Some(&h),
                    readdress: Some("qa"),
                };
                let want = TABLE
                    .iter()
                    .find(|r| {
                        r.mv == mv
                            && r.from.contains(&from)
                            && r.by.iter().any(|a| actors.contains(a))
                    })
                    .map(|r| r.to);
                let got = apply(mv, &st, &ctx);
                let (Some(to), Ok(c)) = (want, &got) else {
                    assert!(want.is_none() && got.is_err(), "{from:?} {mv:?} {actors:?}: {got:?}");
                    continue;
                };
                allowed += 1;
                let r = &c.record;
                let what = format!("{from:?} {mv:?} {actors:?}");
                assert_eq!(r.status, to, "{what}");
                let ev = c.events.last().unwrap();
                assert_eq!(
                    (ev.from, ev.to, ev.epoch),
                    (Some(from), Some(to), Some(r.epoch)),
                    "{what}"
                );
                assert_eq!(ev.task.as_ref(), Some(&r.task_id), "{what}");
                assert_eq!(ev.agent, ctx.by, "{what}");
                // An owner exactly while held (and kept as who finished it), a lease only while held.
                if to.is_owned() {
                    assert!(r.owner.is_some() && r.lease_expires_at.is_some(), "{what}");
                } else {
                    assert!(r.lease_expires_at.is_none(), "{what}");
                }
                if matches!(to, Status::New | Status::Parked) {
                    assert!(r.owner.is_none(), "{what}");
                    let lands_in_new = match &c.ticket {
                        Ticket::MoveTo(b) => *b == Mailbox::NewMessages,
                        Ticket::Stay => st.location == Some(Mailbox::NewMessages),
                        Ticket::Deliver { .. } => true,
                    };
                    assert!(lands_in_new, "{what}: a waiting task's message is in NEW_MESSAGES");
                }
                // The epoch moves exactly when the owner changes.
                let owner_changed = r.owner != st.rec.owner && !to.is_terminal();
                assert_eq!(r.epoch != st.rec.epoch, owner_changed, "{what}");
                if owner_changed {
                    assert_eq!(r.epoch, st.rec.epoch + 1, "{what}");
                }
                if mv == Move::Claim {
                    assert_eq!(c.ticket, Ticket::MoveTo(Mailbox::Inbox(agent(ctx.by))), "{what}");
                    assert_eq!(r.attempts, st.rec.attempts + 1, "{what}");
                }
                assert_eq!(
                    r.expiries > st.rec.expiries,
                    matches!(mv, Move::Expire | Move::Park),
                    "{what}"
                );
                assert_eq!(
                    c.notices.is_empty(),
                    !matches!(mv, Move::Park | Move::Lapse),
                    "{what}: parking escalates, an expiry tells the coordinators"
                );
                if mv == Move::Lapse {
                    let filed = match &c.ticket {
                        Ticket::MoveTo(b) => *b == Mailbox::Logs,
                        _ => false,
                    };
                    assert!(filed, "{what}: an expired task's message is history");
                }
                if mv == Move::Readdress {
                    assert_eq!(r.to, "qa", "{what}");
                }
                assert!(c.outbox.is_empty(), "{what}: a move sends nothing by itself");
            }
        }
    }
    assert_eq!(allowed, 50, "the same count as the table's own test");
}

/// Past its deadline a task is neither claimed nor completed; before it, it does not lapse.
#[test]
fn deadlines_gate_claims_and_completions() {
    let mut st = state(Status::InProgress);
    st.rec.deadline = Some("2025-11-21T16:59:59Z".into());
    let owner = MoveCtx {
        by: "o1",
        actors: &[Actor::Owner],
        now: now(),
        lease: Duration::from_secs(60),
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let e = apply(Move::Complete, &st, &owner).unwrap_err();
    assert!(e.message.contains("deadline"), "{}", e.message);
    assert!(apply(Move::Fail, &st, &owner).is_ok(), "failing stays possible");
    let mut waiting = state(Status::New);
    waiting.rec.deadline = st.rec.deadline.clone();
    let e = apply(Move::Claim, &waiting, &claim_ctx(now())).unwrap_err();
    assert_eq!(e.kind, crate::error::Kind::Refused);
    let lapse = MoveCtx { by: "circe", actors: &[Actor::Deadline], ..owner };
    let c = apply(Move::Lapse, &st, &lapse).unwrap();
    assert_eq!(c.record.status, Status::Expired);
    assert_eq!(c.record.owner, st.rec.owner, "who held it is kept");
    assert_eq!(c.notices[0].intent, "status_update");
    st.rec.deadline = Some("2025-11-21T17:00:01Z".into());
    assert!(apply(Move::Lapse, &st, &lapse).is_err(), "not yet past");
    assert!(apply(Move::Complete, &st, &owner).is_ok(), "in time");
    assert!(c.record.render().starts_with("v: 3\n"), "an expired record needs format 3");
}

#[test]
fn completion_is_gated_by_checks() {
    let mut st = state(Status::InProgress);
    st.checks.insert(CheckName::new("peer_reviewed").unwrap(), false);
    let ctx = MoveCtx {
        by: "o1",
        actors: &[Actor::Owner],
        now: now(),
        lease: Duration::from_secs(60),
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let e = apply(Move::Complete, &st, &ctx).unwrap_err();
    assert!(e.message.contains("peer_reviewed"), "{}", e.message);
    assert!(!e.hint.unwrap_or_default().contains("=true"), "the hint never teaches the bypass");
    assert!(apply(Move::Fail, &st, &ctx).is_ok(), "failing needs no checks");
}

fn claim_ctx<'a>(at: DateTime<Utc>) -> MoveCtx<'a> {
    MoveCtx {
        by: "e1",
        actors: &[Actor::Eligible],
        now: at,
        lease: Duration::from_secs(600),
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    }
}

/// A claim of a task whose lease ran out takes it over in one change: `expire` then `claim`,
/// epoch + 2, one expiry more.
#[test]
fn takeover_is_expire_then_claim() {
    let st = state(Status::InProgress);
    let later = now() + chrono::Duration::minutes(30);
    let (c, parked) = claim(&st, &claim_ctx(later), 3).unwrap();
    assert!(!parked);
    let kinds: Vec<EventKind> = c.events.iter().map(|e| e.event).collect();
    assert_eq!(kinds, [EventKind::Expire, EventKind::Claim]);
    assert_eq!(c.record.epoch, st.rec.epoch + 2);
    assert_eq!(c.record.expiries, 2);
    assert_eq!(c.record.owner, Some(agent("e1")));
    assert_eq!(c.events[0].owner.as_deref(), Some("o1"));
    // The ticket goes straight into the claimer's INBOX: both events name it there.
    assert_eq!(c.ticket, Ticket::MoveTo(Mailbox::Inbox(agent("e1"))));
    for e in &c.events {
        assert_eq!(e.files.len(), 1, "{e:?}");
        assert_eq!(e.files[0].mailbox, "inbox:e1", "{e:?}");
    }
    // Before the lease ran out, a claim by another agent is refused by the table.
    assert!(claim(&st, &claim_ctx(now()), 3).is_err());
}

/// `max_attempts` counts leases that ran out, not claims: a task claimed and released many
/// times parks only on its max_attempts-th expired lease.
#[test]
fn parking_counts_expired_leases_only() {
    let mut st = state(Status::Claimed);
    st.rec.attempts = 7;
    st.rec.expiries = 0;
    let later = now() + chrono::Duration::minutes(30);
    let (c, parked) = claim(&st, &claim_ctx(later), 3).unwrap();
    assert!(!parked, "7 claims but the first expiry: expire, not park");
    assert_eq!(c.record.expiries, 1);
    st.rec.expiries = 2;
    let (c, parked) = claim(&st, &claim_ctx(later), 3).unwrap();
    assert!(parked, "the third expired lease parks");
    assert_eq!(c.record.status, Status::Parked);
    assert_eq!(c.notices[0].intent, "escalate");
    assert_eq!(lease_ran_out(&st.rec, 3), Move::Park);
}

#[test]
fn handoff_keeps_priority_unless_the_message_sets_one() {
    let st = state(Status::InProgress);
    let h = handoff();
    let ctx = MoveCtx {
        by: "o1",
        actors: &[Actor::Owner],
        now: now(),
        lease: Duration::from_secs(60),
        note: None,
        forced: false,
        handoff: Some(&h),
        readdress: None,
    };
    let c = apply(Move::Handoff, &st, &ctx).unwrap();
    assert_eq!(c.record.priority, "high");
    assert_eq!(c.record.message, "h.md");
    assert!(!c.checks.unwrap()[&CheckName::new("tests_passed").unwrap()]);
    let mut low = handoff();
    low.priority = Some("low".into());
    let ctx = MoveCtx { handoff: Some(&low), ..ctx };
    assert_eq!(apply(Move::Handoff, &st, &ctx).unwrap().record.priority, "low");
}

/// A lease too long to write down is refused, never a panic.
#[test]
fn a_lease_past_the_calendar_is_refused() {
    let st = state(Status::New);
    let mut ctx = claim_ctx(now());
    ctx.lease = Duration::from_secs(u64::MAX / 2);
    assert_eq!(apply(Move::Claim, &st, &ctx).unwrap_err().kind, crate::error::Kind::Internal);
    assert!(heartbeat(&state(Status::Claimed), now(), ctx.lease).is_err());
}
