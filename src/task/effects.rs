//! What a move changes, as data: the lifecycle table's effects.
//!
//! `apply` asks the table (`lifecycle::decide`) and, when the move is allowed, returns the
//! whole change: the new record, where the task's message (its ticket) goes, the events to
//! log once the change is committed, and the notices circe sends on its own. The engine
//! commits a `Change` inside the task's transaction; nothing else writes a record.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::lifecycle::{Actor, Move, Status, decide};
use super::record::{Checks, Outgoing, StatusRecord};
use super::state::TaskState;
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::names::{AgentName, CheckName};

/// Where the task's message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ticket {
    /// It stays where it is.
    Stay,
    /// One rename into this box: the change's commit point.
    MoveTo(Mailbox),
    /// A new message becomes the ticket: delivered into NEW_MESSAGES under `name` (or the
    /// first free `name.N.md`), which is the commit point (opening a task, a handoff).
    Deliver { name: String, content: Vec<u8> },
}

/// A message circe sends by itself after the change (as sender `circe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub intent: &'static str,
    pub text: String,
    /// An agent told besides the notice's own recipients (the holder of a task that
    /// expired at its deadline: its work can no longer be completed).
    pub also: Option<String>,
}

/// One change to one task, committed as a whole by the engine.
#[derive(Debug, Clone)]
pub struct Change {
    /// The operation's name (`claim`, `status`, `check`, ...): names its crash points.
    pub op: &'static str,
    pub record: StatusRecord,
    /// The checks, when the change sets them.
    pub checks: Option<Checks>,
    pub ticket: Ticket,
    /// Logged after the commit point, in this order.
    pub events: Vec<Event>,
    /// Sent after the commit.
    pub notices: Vec<Notice>,
    /// Messages sent exactly once with the change: written into the record by its commit and
    /// delivered right after (a crash in between is finished by the next transaction).
    pub outbox: Vec<Outgoing>,
    /// The request id of the claim making this change: the engine remembers which grant it
    /// made, so a retry of an ambiguous claim finds it (`Engine::granted`).
    pub request: Option<String>,
}

/// What a handoff's message says about the task's next turn.
#[derive(Debug, Clone)]
pub struct Handoff {
    pub name: String,
    pub content: Vec<u8>,
    pub intent: String,
    pub to: String,
    /// `None`: the task keeps its priority.
    pub priority: Option<String>,
    /// `None`: the task keeps its deadline.
    pub deadline: Option<String>,
    pub required_checks: Vec<CheckName>,
}

/// Who moves the task, when, and with what.
pub struct MoveCtx<'a> {
    /// The acting agent, or `circe`.
    pub by: &'a str,
    pub actors: &'a [Actor],
    pub now: DateTime<Utc>,
    /// The lease a claim starts with.
    pub lease: Duration,
    pub note: Option<&'a str>,
    /// A coordinator acting on a task it does not hold (`release --force`).
    pub forced: bool,
    /// The new message of a handoff.
    pub handoff: Option<&'a Handoff>,
    /// The new address of a readdress.
    pub readdress: Option<&'a str>,
}

impl MoveCtx<'_> {
    fn ts(&self) -> String {
        clock::stamp_ms(self.now)
    }
}

/// The move a lease that ran out makes: `expire`, or `park` once leases ran out
/// `max_attempts` times (this one included).
pub fn lease_ran_out(rec: &StatusRecord, max_attempts: u32) -> Move {
    if rec.expiries.saturating_add(1) >= max_attempts { Move::Park } else { Move::Expire }
}

/// Has the task's lease run out at `now`?
pub fn lease_expired(rec: &StatusRecord, now: DateTime<Utc>) -> bool {
    rec.lease_expires_at.as_deref().and_then(clock::parse).is_some_and(|t| t <= now)
}

/// Has the task's deadline passed at `now`?
pub fn deadline_passed(rec: &StatusRecord, now: DateTime<Utc>) -> bool {
    rec.deadline.as_deref().and_then(clock::parse).is_some_and(|t| t <= now)
}

/// The change `mv` makes to the task in `st`, or the table's refusal.
pub fn apply(mv: Move, st: &TaskState, ctx: &MoveCtx<'_>) -> Result<Change> {
    let from = st.rec.status;
    let to = decide(from, mv, ctx.actors).map_err(|e| {
        if !from.is_terminal() {
            return e;
        }
        // Nothing leads out of a final status: the way on, said to this agent.
        let ask = if ctx.actors.contains(&Actor::Coordinator) { "" } else { " or ask a coordinator to" };
        e.hint(format!(
            "completed, failed and expired tasks stay as they are; to go on, open a new task (`circe --agent {} prime` lists the intents you may open one with){ask}",
            ctx.by
        ))
    })?;
    match mv {
        Move::Complete => {
            gate_on_deadline(st, ctx.now, "completed")?;
            gate_on_checks(st, ctx.by)?;
        }
        Move::Claim => gate_on_deadline(st, ctx.now, "claimed")?,
        // Handed on past its deadline, it would wait for nobody and expire unseen (unless the
        // handoff sets a new one).
        Move::Handoff if ctx.handoff.is_none_or(|h| h.deadline.is_none()) => {
            gate_on_deadline(st, ctx.now, "handed on")?;
        }
        Move::Lapse if !deadline_passed(&st.rec, ctx.now) => {
            return Err(Error::refused(format!(
                "task {} is not past its deadline ({})",
                st.rec.task_id,
                st.rec.deadline.as_deref().unwrap_or("none")
            )));
        }
        _ => {}
    }
    let (rec, ticket, checks) = next_record(mv, to, st, ctx)?;
    let mut notices = Vec::new();
    if mv == Move::Lapse {
        notices.push(Notice {
            intent: "status_update",
            text: format!(
                "task {} expired: its deadline {} passed while it was {}{}",
                rec.task_id,
                st.rec.deadline.as_deref().unwrap_or("-"),
                from.as_str(),
                st.rec.owner.as_ref().map_or_else(String::new, |o| format!(" (held by {o})"))
            ),
            also: st.rec.owner.as_ref().filter(|_| from.is_owned()).map(ToString::to_string),
        });
    }
    if mv == Move::Park {
        notices.push(Notice {
            intent: "escalate",
            text: format!(
                "task {} parked: its lease ran out {} times; its last owner was {}\n\nOnce the cause is understood, a coordinator puts it back in the queue: `circe release --force {}` (or addresses it anew: `circe readdress {} --to ...`).",
                rec.task_id,
                rec.expiries,
                st.rec.owner.as_deref().unwrap_or("nobody"),
                rec.task_id,
                rec.task_id
            ),
            also: None,
        });
    }
    let ev = move_event(mv, st, &rec, ctx);
    let op = match mv {
        Move::Claim => "claim",
        Move::Start | Move::Block | Move::Unblock | Move::Complete | Move::Fail => "status",
        Move::Release | Move::Requeue => "release",
        Move::Expire => "expire",
        Move::Park => "park",
        Move::Handoff => "handoff",
        Move::Lapse => "lapse",
        Move::Readdress => "readdress",
    };
    Ok(Change {
        op,
        record: rec,
        checks,
        ticket,
        events: vec![ev],
        notices,
        outbox: Vec::new(),
        request: None,
    })
}

/// Past its deadline a task is not claimed or completed.
fn gate_on_deadline(st: &TaskState, now: DateTime<Utc>, what: &str) -> Result<()> {
    if !deadline_passed(&st.rec, now) {
        return Ok(());
    }
    let task = &st.rec.task_id;
    Err(Error::refused(format!(
        "task {task} cannot be {what}: its deadline {} has passed",
        st.rec.deadline.as_deref().unwrap_or("-")
    ))
    .detail("deadline", st.rec.deadline.clone().unwrap_or_default())
    .hint(if what == "handed on" {
        "hand it on with a later deadline (--deadline), or tell the coordinator: `circe reap` marks it expired"
    } else {
        "`circe reap` marks it expired and tells the coordinators; open a new task to go on"
    }))
}

/// The hint to the holder for a check not passed: run it with the command that proves it,
/// or, `declared` in circe.yaml, with the command declared there.
pub fn run_them(by: &str, task: &str, check: &str, declared: bool) -> String {
    format!("run them: {}", run_check(by, task, check, declared))
}

/// The command that records `check` by running it: `--run NAME` alone when circe.yaml
/// declares its command (`declared`: any other command, and an assertion, is refused), else
/// with the command that proves it after `--`.
pub fn run_check(by: &str, task: &str, check: &str, declared: bool) -> String {
    if declared {
        format!("circe --agent {by} check {task} --run {check} (circe.yaml declares its command)")
    } else {
        format!("circe --agent {by} check {task} --run {check} -- <command that proves it>")
    }
}

/// Completion waits until every check of the task is true.
fn gate_on_checks(st: &TaskState, by: &str) -> Result<()> {
    let missing: Vec<&str> =
        st.checks.iter().filter(|(_, v)| !**v).map(|(k, _)| k.as_str()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let task = &st.rec.task_id;
    let err = Error::refused(format!(
        "task {task} cannot be completed: checks not passed: {}",
        missing.join(", ")
    ))
    .detail("not_passed", missing.clone());
    let first = missing[0];
    // Only the holder runs a check; anyone else allowed to complete it (a coordinator)
    // asserts one with a reason.
    Err(match st.rec.owner.as_deref() {
        Some(holder) if holder != by => err.hint(format!(
            "its holder, {holder}, runs them (ask: `circe --agent {by} send --to agent:{holder} --intent request_help --summary \"please run {first} on {task}\"`); or a coordinator records one with the reason: circe --agent {by} check {task} {first}=true --reason \"...\""
        )),
        _ => err.hint(run_them(by, task.as_str(), first, false)),
    })
}

/// The record after `mv` (allowed, leading to `to`), where the ticket goes, and the checks
/// when the move sets them.
fn next_record(
    mv: Move,
    to: Status,
    st: &TaskState,
    ctx: &MoveCtx<'_>,
) -> Result<(StatusRecord, Ticket, Option<Checks>)> {
    let from = st.rec.status;
    let mut rec = st.rec.clone();
    let now = clock::stamp(ctx.now);
    let mut ticket = Ticket::Stay;
    let mut checks = None;
    rec.status = to;
    rec.updated_at.clone_from(&now);
    match mv {
        Move::Claim => {
            let me = AgentName::new(ctx.by)?;
            rec.owner = Some(me.clone());
            rec.bump_epoch()?;
            rec.attempts = rec.attempts.saturating_add(1);
            rec.started_at.get_or_insert(now);
            rec.lease_expires_at = Some(clock::lease_until(ctx.now, ctx.lease)?);
            rec.note = None;
            ticket = Ticket::MoveTo(Mailbox::Inbox(me));
        }
        Move::Start | Move::Block | Move::Unblock | Move::Complete | Move::Fail => {
            if let Some(n) = ctx.note {
                rec.note = Some(n.to_string());
            }
            if to.is_terminal() {
                rec.lease_expires_at = None;
            }
        }
        Move::Release | Move::Expire | Move::Park | Move::Requeue => {
            rec.owner = None;
            if from.is_owned() {
                rec.bump_epoch()?;
            }
            rec.lease_expires_at = None;
            match mv {
                Move::Expire | Move::Park => rec.expiries = rec.expiries.saturating_add(1),
                Move::Requeue => {
                    rec.attempts = 0;
                    rec.expiries = 0;
                    // The coordinator's reason, for the next claimer (else why it was parked).
                    if let Some(n) = ctx.note {
                        rec.note = Some(n.to_string());
                    }
                }
                _ => rec.note = ctx.note.map(str::to_string),
            }
            if st.location.as_ref() != Some(&Mailbox::NewMessages) {
                ticket = Ticket::MoveTo(Mailbox::NewMessages);
            }
        }
        Move::Lapse => {
            rec.lease_expires_at = None;
            rec.note =
                Some(format!("deadline {} passed", st.rec.deadline.as_deref().unwrap_or("-")));
            if st.location.as_ref() != Some(&Mailbox::Logs) {
                ticket = Ticket::MoveTo(Mailbox::Logs);
            }
        }
        Move::Readdress => {
            let to =
                ctx.readdress.ok_or_else(|| Error::internal("a readdress without an address"))?;
            rec.to = to.to_string();
            rec.attempts = 0;
            rec.expiries = 0;
            rec.note = ctx.note.map(str::to_string);
            if st.location.as_ref() != Some(&Mailbox::NewMessages) {
                ticket = Ticket::MoveTo(Mailbox::NewMessages);
            }
        }
        Move::Handoff => {
            let h = ctx.handoff.ok_or_else(|| Error::internal("a handoff without its message"))?;
            rec.owner = None;
            rec.bump_epoch()?;
            rec.lease_expires_at = None;
            rec.note = None;
            rec.handoff = None;
            rec.handoff_checks.clear();
            rec.intent.clone_from(&h.intent);
            rec.to.clone_from(&h.to);
            if let Some(p) = &h.priority {
                rec.priority.clone_from(p);
            }
            if let Some(d) = &h.deadline {
                rec.deadline = Some(d.clone());
            }
            // The new holder must pass the new intent's checks itself; others carry over.
            let mut c = st.checks.clone();
            for name in &h.required_checks {
                c.insert(name.clone(), false);
            }
            rec.asserted.retain(|a| !h.required_checks.contains(a));
            checks = Some(c);
            rec.message.clone_from(&h.name);
            ticket = Ticket::Deliver { name: h.name.clone(), content: h.content.clone() };
        }
    }
    Ok((rec, ticket, checks))
}

/// The event a move logs.
fn move_event(mv: Move, st: &TaskState, rec: &StatusRecord, ctx: &MoveCtx<'_>) -> Event {
    let mut ev = Event::new(EventKind::of_move(mv), ctx.by, ctx.ts()).task(&rec.task_id).moved(
        Some(st.rec.status),
        rec.status,
        rec.epoch,
    );
    match mv {
        Move::Claim => {
            ev.attempts = Some(rec.attempts);
            ev = ev.file(format!("inbox:{}", ctx.by), rec.message.clone());
        }
        Move::Release | Move::Expire | Move::Park => {
            ev.owner = st.rec.owner.as_ref().map(ToString::to_string);
            ev.forced = ctx.forced;
            if mv == Move::Release {
                ev.reason = ctx.note.map(str::to_string);
            } else {
                ev.expiries = Some(rec.expiries);
                ev.attempts = Some(rec.attempts);
            }
            ev = ev.file("new".into(), rec.message.clone());
        }
        Move::Handoff => {
            ev.intent = Some(rec.intent.clone());
            ev.addressed_to = Some(rec.to.clone());
            ev = ev.file("new".into(), rec.message.clone());
        }
        Move::Requeue => {
            ev.forced = ctx.forced;
            ev.reason = ctx.note.map(str::to_string);
            ev = ev.file("new".into(), rec.message.clone());
        }
        Move::Lapse => {
            ev.owner = st.rec.owner.as_ref().map(ToString::to_string);
            ev.note.clone_from(&rec.note);
            if st.location.as_ref() != Some(&Mailbox::Logs) {
                ev = ev.file("logs".into(), rec.message.clone());
            }
        }
        Move::Readdress => {
            ev.addressed_to = Some(rec.to.clone());
            ev.reason = ctx.note.map(str::to_string);
        }
        Move::Start | Move::Block | Move::Unblock | Move::Complete | Move::Fail => {
            ev.note = ctx.note.map(str::to_string);
        }
    }
    ev
}

/// A claim of `st` by `ctx.by`, taking over a holder whose lease ran out (events `expire`
/// then `claim`, one commit, both naming the claimer's INBOX, where the ticket goes). When that expiry parks the task instead, the park is the change
/// and `parked` is true: commit it, then refuse the claim.
pub fn claim(st: &TaskState, ctx: &MoveCtx<'_>, max_attempts: u32) -> Result<(Change, bool)> {
    if !(st.rec.status.is_owned() && lease_expired(&st.rec, ctx.now)) {
        return apply(Move::Claim, st, ctx).map(|c| (c, false));
    }
    let mv = lease_ran_out(&st.rec, max_attempts);
    let expiry = MoveCtx {
        by: ctx.by,
        actors: &[Actor::Lease],
        now: ctx.now,
        lease: ctx.lease,
        note: None,
        forced: false,
        handoff: None,
        readdress: None,
    };
    let ran_out = apply(mv, st, &expiry)?;
    if mv == Move::Park {
        return Ok((ran_out, true));
    }
    let between = TaskState {
        rec: ran_out.record,
        owner: None,
        checks: st.checks.clone(),
        location: st.location.clone(),
    };
    let mut claimed = apply(Move::Claim, &between, ctx)?;
    // The ticket never lay in NEW_MESSAGES: it went from the old owner's box straight into
    // the claimer's INBOX, in the one commit both events follow. So the expiry names where
    // it lies after it (the claim's file), never a file that is not there.
    let mut events = ran_out.events;
    let lies = claimed.events.iter().find(|e| e.event == EventKind::Claim).map(|e| e.files.clone());
    for e in &mut events {
        e.files = lies.clone().unwrap_or_default();
    }
    events.append(&mut claimed.events);
    claimed.events = events;
    Ok((claimed, false))
}

pub use super::changes::{OpenSpec, heartbeat, open, record_check};

#[cfg(test)]
#[path = "effects_tests.rs"]
mod tests;
