//! Opening a task: a task message lands in NEW_MESSAGES and `TASKS/<id>.status` says `new`.
//! Sent by the task's current owner, the same message is a handoff: the task goes back to
//! the queue with the new message as its ticket (engineer -> qa in the reference flow).

use serde::Serialize;

use super::claim::write;
use super::event::Event;
use super::lifecycle::{Actor, Move, Status, decide};
use super::queue;
use super::record::{self, Checks, StatusRecord};
use super::state::{TaskState, load_reconciled};
use crate::clock;
use crate::error::{Error, Result};
use crate::store::{Mailbox, crash_point};
use crate::workspace::Workspace;

/// What the task message says about the task.
pub struct OpenSpec<'a> {
    pub task_id: &'a str,
    pub intent: &'a str,
    pub to: &'a str,
    pub priority: &'a str,
    pub sender: &'a str,
    pub required_checks: &'a [String],
}

#[derive(Debug, Clone, Serialize)]
pub struct OpenOutcome {
    pub record: StatusRecord,
    /// The previous owner when this send was a handoff.
    pub handoff_from: Option<String>,
    pub message: String,
}

/// Deliver a task message and create (or hand off) its task. `name(n)` gives the message's
/// file name with collision counter n.
pub fn open_task(
    ws: &Workspace,
    spec: &OpenSpec<'_>,
    content: &[u8],
    name: &dyn Fn(u32) -> String,
) -> Result<OpenOutcome> {
    let task = spec.task_id;
    let _lock = ws.store.lock_task(task)?;
    match load_reconciled(ws, task)? {
        None => open_new(ws, spec, content, name),
        Some(st) => handoff(ws, spec, st, content, name),
    }
}

fn free_name(ws: &Workspace, name: &dyn Fn(u32) -> String) -> String {
    (1..10_000)
        .map(name)
        .find(|n| !ws.store.has_message(&Mailbox::NewMessages, n))
        .unwrap_or_else(|| name(1))
}

fn open_new(
    ws: &Workspace,
    spec: &OpenSpec<'_>,
    content: &[u8],
    name: &dyn Fn(u32) -> String,
) -> Result<OpenOutcome> {
    let now = clock::stamp(clock::now());
    let ticket = free_name(ws, name);
    let rec = StatusRecord {
        task_id: spec.task_id.to_string(),
        status: Status::New,
        owner: None,
        started_at: None,
        updated_at: now.clone(),
        created_at: now,
        intent: spec.intent.to_string(),
        priority: spec.priority.to_string(),
        to: spec.to.to_string(),
        opened_by: spec.sender.to_string(),
        epoch: 0,
        attempts: 0,
        message: ticket.clone(),
        lease_expires_at: None,
        note: None,
        handoff: None,
    };
    let checks: Checks = spec.required_checks.iter().map(|c| (c.clone(), false)).collect();
    // Record first, message second: the message's rename is the commit point, and a record
    // whose message never arrived is rolled back by the next command (state::load_reconciled).
    super::board::write(
        ws,
        spec.task_id,
        &[("status", Some(&rec.render())), ("checks", Some(&record::render_checks(&checks)))],
        Some((&rec, &checks)),
    )?;
    crash_point("send.recorded");
    let fixed = |_n: u32| ticket.clone();
    ws.store.put_message(&Mailbox::NewMessages, &fixed, content).inspect_err(|_e| {
        let _ = super::board::write(ws, spec.task_id, &[("status", None), ("checks", None)], None);
    })?;
    crash_point("send.committed");
    queue::push(ws, &rec)?;
    Event::new("open", spec.sender)
        .task(spec.task_id)
        .moved("none", "new", 0)
        .with("intent", spec.intent)
        .with("addressed_to", spec.to)
        .with("message", ticket.as_str())
        .append(&ws.store)?;
    Ok(OpenOutcome { record: rec, handoff_from: None, message: ticket })
}

fn handoff(
    ws: &Workspace,
    spec: &OpenSpec<'_>,
    mut st: TaskState,
    content: &[u8],
    name: &dyn Fn(u32) -> String,
) -> Result<OpenOutcome> {
    let task = spec.task_id;
    let from = st.rec.status;
    match (from, st.rec.owner.as_deref()) {
        (s, Some(o)) if s.is_owned() && o == spec.sender => {}
        (Status::New, _) => {
            return Err(Error::conflict(format!(
                "task {task} exists and is waiting to be claimed"
            ))
            .hint("use a new task id, or claim the task before handing it on"));
        }
        (s, Some(o)) if s.is_owned() => {
            return Err(Error::conflict(format!(
                "task {task} is held by {o}; only its owner can hand it on"
            ))
            .detail("owner", o.to_string()));
        }
        (s, _) => {
            return Err(Error::refused(format!("task {task} exists and is {}", s.as_str()))
                .hint("open a new task with a new task id"));
        }
    }
    decide(from, Move::Handoff, &[Actor::Owner])?;
    // Record the new message's name first, then deliver it (the commit point), then the
    // records. A crash in between is finished or undone by the next command that loads the
    // task (state::load_reconciled) with one stat: no listing of NEW_MESSAGES.
    let ticket = free_name(ws, name);
    st.rec.handoff = Some(ticket.clone());
    write(ws, &st, st.owner.as_ref())?;
    crash_point("handoff.recorded");
    let fixed = |_n: u32| ticket.clone();
    if let Err(e) = ws.store.put_message(&Mailbox::NewMessages, &fixed, content) {
        st.rec.handoff = None;
        let _ = write(ws, &st, st.owner.as_ref());
        return Err(e);
    }
    crash_point("handoff.delivered");
    let old_owner = st.rec.owner.clone();
    let h = Handoff {
        ticket: ticket.clone(),
        intent: spec.intent.to_string(),
        to: spec.to.to_string(),
        priority: spec.priority.to_string(),
        required_checks: spec.required_checks.to_vec(),
    };
    finish_handoff(ws, &mut st, &h, spec.sender, false)?;
    Ok(OpenOutcome { record: st.rec, handoff_from: old_owner, message: ticket })
}

/// What a handoff's message says about the task's next turn.
pub(super) struct Handoff {
    pub ticket: String,
    pub intent: String,
    pub to: String,
    pub priority: String,
    pub required_checks: Vec<String>,
}

/// The records of a handoff whose message is in NEW_MESSAGES: the task is `new` again with
/// that message as its ticket. The new holder must pass the new intent's checks itself (QA
/// re-runs tests_passed rather than inherit the engineer's result); other checks carry over.
pub(super) fn finish_handoff(
    ws: &Workspace,
    st: &mut TaskState,
    h: &Handoff,
    by: &str,
    repair: bool,
) -> Result<()> {
    let from = st.rec.status;
    let to = decide(from, Move::Handoff, &[Actor::Owner])?;
    st.rec.owner = None;
    st.rec.status = to;
    st.rec.epoch += 1;
    st.rec.lease_expires_at = None;
    st.rec.updated_at = clock::stamp(clock::now());
    st.rec.intent.clone_from(&h.intent);
    st.rec.to.clone_from(&h.to);
    st.rec.priority.clone_from(&h.priority);
    st.rec.message.clone_from(&h.ticket);
    st.rec.handoff = None;
    st.rec.note = None;
    for c in &h.required_checks {
        st.checks.insert(c.clone(), false);
    }
    let checks = record::render_checks(&st.checks);
    let status = st.rec.render();
    super::board::write(
        ws,
        &st.rec.task_id,
        &[("status", Some(&status)), ("owner", None), ("checks", Some(&checks))],
        Some((&st.rec, &st.checks)),
    )?;
    st.owner = None;
    st.location = Some(Mailbox::NewMessages);
    queue::push(ws, &st.rec)?;
    let mut ev = Event::new("handoff", by)
        .task(&st.rec.task_id)
        .moved(from.as_str(), to.as_str(), st.rec.epoch)
        .with("intent", h.intent.as_str())
        .with("addressed_to", h.to.as_str())
        .with("message", h.ticket.as_str());
    if repair {
        ev = ev.with("repair", true);
    }
    ev.append(&ws.store)
}
