//! Opening a task: a task message lands in NEW_MESSAGES and the task is `new`. Sent by the
//! task's current owner, the same message is a handoff: the task goes back to the queue with
//! the new message as its ticket (engineer -> qa in the reference flow).

use serde::Serialize;

use crate::error::{Error, Result};
use crate::message::{self, Message, Mode};
use crate::names::{AgentName, CheckName, TaskId};
use crate::task::effects::{self, MoveCtx};
use crate::task::{Actor, Handoff, Move, OpenSpec, Status, StatusRecord, TaskState};
use crate::workspace::Workspace;

/// What the task message says about the task.
#[derive(Clone)]
pub struct TaskMessage<'a> {
    pub task_id: &'a TaskId,
    pub intent: &'a str,
    pub to: &'a str,
    /// `None`: not set by the message (normal for a new task; kept at a handoff).
    pub priority: Option<&'a str>,
    /// The message's deadline (`None`: none for a new task; kept at a handoff).
    pub deadline: Option<String>,
    pub sender: &'a AgentName,
    pub required_checks: &'a [CheckName],
    /// The message's file name and text.
    pub name: String,
    pub content: Vec<u8>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpenOutcome {
    pub record: StatusRecord,
    /// The previous owner when this send was a handoff.
    pub handoff_from: Option<AgentName>,
    /// The checks a handoff set back to false (the new holder must pass them itself).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks_reset: Vec<CheckName>,
    pub message: String,
}

/// Deliver a task message and create (or hand off) its task. A transaction that lost a race
/// to open the same task (an engine without a lock for tasks that do not exist yet) is run
/// again, and then sees the task.
pub fn open_task(ws: &Workspace, m: &TaskMessage<'_>) -> Result<OpenOutcome> {
    let mut tries = 0;
    loop {
        match open_once(ws, m.clone()) {
            Err(e) if tries < 3 && e.details.iter().any(|(k, _)| *k == "race") => tries += 1,
            r => return r,
        }
    }
}

fn open_once(ws: &Workspace, m: TaskMessage<'_>) -> Result<OpenOutcome> {
    let task = m.task_id;
    // A tombstone stays for good: one seen now is refused before anything is locked (the
    // look under the transaction below closes the race with an archive run).
    if let Some(t) = ws.engine.archived_task(task)? {
        return Err(archived(ws, task, &t));
    }
    let mut tx = ws
        .engine
        .begin(task, true)?
        .ok_or_else(|| Error::internal(format!("cannot open a transaction on task {task}")))?;
    let Some(st) = tx.state().cloned() else {
        // An archived task's id is never used again (its tombstone is asked under the task's
        // transaction, so an archive run removing the records cannot slip in between).
        if let Some(t) = ws.engine.archived_task(task)? {
            return Err(archived(ws, task, &t));
        }
        let spec = OpenSpec {
            task_id: task.clone(),
            intent: m.intent.to_string(),
            to: m.to.to_string(),
            priority: m.priority.unwrap_or("normal").to_string(),
            deadline: m.deadline.clone(),
            opened_by: m.sender.to_string(),
            required_checks: m.required_checks.to_vec(),
            name: m.name,
            content: m.content,
        };
        let now = ws.tx_now(tx.as_ref());
        tx.commit(effects::open(spec, now))?;
        let rec = tx.state().map(|s| s.rec.clone()).ok_or_else(|| Error::internal("no record"))?;
        let message = rec.message.clone();
        return Ok(OpenOutcome {
            record: rec,
            handoff_from: None,
            checks_reset: Vec::new(),
            message,
        });
    };
    match (st.rec.status, st.rec.owner.as_ref()) {
        (s, Some(o)) if s.is_owned() && o == m.sender => {}
        (Status::New, _) => {
            return Err(Error::conflict(format!(
                "task {task} exists and is waiting to be claimed"
            ))
            .detail("task_id", task.to_string())
            .hint(waiting_hint(ws, &st, &m)));
        }
        (s, Some(o)) if s.is_owned() => {
            return Err(Error::conflict(format!(
                "task {task} is held by {o}; only its owner can hand it on"
            ))
            .detail("task_id", task.to_string())
            .detail("owner", o.to_string())
            .hint(format!("ask {o}, or wait for the lease: `circe show {task}` says until when")));
        }
        (s, _) => {
            return Err(Error::refused(format!("task {task} exists and is {}", s.as_str()))
                .detail("task_id", task.to_string())
                .hint("open a new task with a new task id"));
        }
    }
    let h = Handoff {
        name: m.name,
        content: m.content,
        intent: m.intent.to_string(),
        to: m.to.to_string(),
        priority: m.priority.map(str::to_string),
        deadline: m.deadline.clone(),
        required_checks: m.required_checks.to_vec(),
    };
    let ctx = MoveCtx {
        by: m.sender.as_str(),
        actors: &[Actor::Owner],
        now: ws.tx_now(tx.as_ref()),
        lease: ws.config.lease(),
        note: None,
        forced: false,
        handoff: Some(&h),
        readdress: None,
    };
    let change =
        effects::apply(Move::Handoff, &st, &ctx).map_err(|e| e.about_task(task.as_str()))?;
    let checks_reset: Vec<CheckName> =
        h.required_checks.iter().filter(|c| st.checks.get(*c) == Some(&true)).cloned().collect();
    tx.commit(change)?;
    let rec = tx.state().map(|s| s.rec.clone()).ok_or_else(|| Error::internal("no record"))?;
    let message = rec.message.clone();
    Ok(OpenOutcome { record: rec, handoff_from: st.rec.owner, checks_reset, message })
}

/// The hint for a task message whose task waits already (`new`): the same message run again
/// (its reply lost, say) was handed on already; other work under that id wants a new id.
/// The same message is one with the same intent, recipient, headline and body as the one
/// that waits (its id and time are new on each try).
fn waiting_hint(ws: &Workspace, st: &TaskState, m: &TaskMessage<'_>) -> String {
    let task = &st.rec.task_id;
    if st.rec.intent != m.intent || st.rec.to != m.to {
        return "use a new task id for new work, or claim the task before handing it on".into();
    }
    let waiting = st.location.as_ref().and_then(|b| super::read(ws, b, &st.rec.message).ok());
    let sent = message::parse_bytes(&m.content, Mode::Draft).ok();
    let said = |m: &Message| (m.headline.clone(), m.body.trim().to_string());
    match (waiting, sent) {
        (Some(w), Some(s)) if said(&w) == said(&s) => format!(
            "it waits as this message asks ({} for {}): it was handed on already, nothing to do (`circe show {task}` says by whom)",
            m.intent, m.to
        ),
        (Some(w), Some(_)) => format!(
            "the message that waits says other work ({}): use a new task id for this work (`circe show {task}` shows what waits)",
            w.summary().unwrap_or_default()
        ),
        // What waits does not read: which it is cannot be told.
        _ => format!(
            "if this message is the one sent before, it was handed on already and there is nothing to do; for new work use a new task id (`circe show {task}` shows what waits)"
        ),
    }
}

/// An archived task's id is never used again.
fn archived(ws: &Workspace, task: &TaskId, t: &crate::archive::Tombstone) -> Error {
    let read = super::where_archived(ws, t, format!("`circe show {task}` shows the archived one"));
    let e = Error::refused(format!(
        "task {task} was archived ({}, archived on {}); its id is not used again",
        t.status, t.archived_at
    ))
    .detail("task_id", task.to_string());
    super::archived_details(e, t).hint(format!("open the new work under a new task id; {read}"))
}
