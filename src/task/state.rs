//! Loading a task and reconciling its records with where its message lies.
//!
//! The message's box is the truth (one rename is each step's commit point); the records
//! follow. When they disagree, a command crashed between its rename and its record write,
//! and `reconcile` finishes that command's work (roll forward) or, for a send that never
//! delivered its message, undoes it (roll back).

use super::event::Event;
use super::lifecycle::Status;
use super::record::{self, Checks, OwnerRecord, StatusRecord};
use crate::clock;
use crate::error::Result;
use crate::store::Mailbox;
use crate::workspace::Workspace;

/// A task's records as read (and reconciled) under its lock.
#[derive(Debug, Clone)]
pub struct TaskState {
    pub rec: StatusRecord,
    pub owner: Option<OwnerRecord>,
    pub checks: Checks,
    /// Where the task's message lies; `None` once archived away or lost.
    pub location: Option<Mailbox>,
}

/// Where message `name` of a task lies: the owner's boxes first, then the shared ones,
/// then every agent's.
pub fn locate(ws: &Workspace, owner: Option<&str>, name: &str) -> Option<Mailbox> {
    let mut first = Vec::with_capacity(4);
    if let Some(o) = owner {
        first.push(Mailbox::Inbox(o.to_string()));
        first.push(Mailbox::Workspace(o.to_string()));
    }
    first.push(Mailbox::NewMessages);
    first.push(Mailbox::Logs);
    if let Some(b) = first.into_iter().find(|b| ws.store.has_message(b, name)) {
        return Some(b);
    }
    // Only a crashed claim or a hand-moved file puts it anywhere else.
    ws.agents()
        .keys()
        .filter(|a| Some(a.as_str()) != owner)
        .flat_map(|a| [Mailbox::Inbox(a.clone()), Mailbox::Workspace(a.clone())])
        .find(|b| ws.store.has_message(b, name))
}

/// Read a task's records. `None` when it has no `.status`. Call under the task lock.
pub fn load(ws: &Workspace, task: &str) -> Result<Option<TaskState>> {
    let Some(text) = ws.store.read_record(task, "status")? else {
        return Ok(None);
    };
    let rec = StatusRecord::parse(task, &text)?;
    let owner = ws.store.read_record(task, "owner")?.and_then(|t| OwnerRecord::parse(&t));
    let checks = match ws.store.read_record(task, "checks")? {
        Some(t) => record::parse_checks(task, &t)?,
        None => Checks::new(),
    };
    let location = locate(ws, rec.owner.as_deref(), &rec.message);
    Ok(Some(TaskState { rec, owner, checks, location }))
}

/// Load and make the records agree with the message's box. Call under the task lock.
/// Returns `None` when the task does not exist (or its send never committed).
pub fn load_reconciled(ws: &Workspace, task: &str) -> Result<Option<TaskState>> {
    let Some(mut st) = load(ws, task)? else {
        return Ok(None);
    };
    if crate::store::test_break("no-reconcile") {
        return Ok(Some(st));
    }
    if let Some(ticket) = st.rec.handoff.clone() {
        finish_or_undo_handoff(ws, &mut st, &ticket)?;
    }
    let now = clock::stamp(clock::now());
    let rec = &mut st.rec;
    let fix: Option<&str> = match (&st.location, rec.status) {
        // A send that wrote the record but crashed before delivering: undo it.
        (None, Status::New) if rec.attempts == 0 => {
            super::board::write(
                ws,
                task,
                &[("status", None), ("owner", None), ("checks", None)],
                None,
            )?;
            Event::new("repair", "circe")
                .task(task)
                .with("what", "send never delivered; record removed")
                .append(&ws.store)?;
            return Ok(None);
        }
        // Claimed (or stolen after expiry) but the records were not written.
        (Some(Mailbox::Inbox(a) | Mailbox::Workspace(a)), s)
            if rec.owner.as_deref() != Some(a.as_str())
                && (s == Status::New || s.is_owned() || s == Status::Parked) =>
        {
            let lease = ws.config.lease();
            rec.owner = Some(a.clone());
            rec.status = Status::Claimed;
            rec.epoch += 1;
            rec.attempts += 1;
            rec.started_at.get_or_insert(now.clone());
            rec.lease_expires_at = Some(clock::lease_until(clock::now(), lease)?);
            Some("claim finished (message was in the agent's box)")
        }
        // Released (or expired, or handed off) but the records still name an owner.
        (Some(Mailbox::NewMessages), s) if s.is_owned() => {
            rec.owner = None;
            rec.status = Status::New;
            rec.epoch += 1;
            rec.lease_expires_at = None;
            Some("release finished (message was back in NEW_MESSAGES)")
        }
        _ => None,
    };
    if let Some(what) = fix {
        rec.updated_at.clone_from(&now);
        let owner = rec.owner_record(&now, &super::host(), 0);
        let status_text = rec.render();
        let owner_text = owner.as_ref().map(OwnerRecord::render);
        super::board::write(
            ws,
            task,
            &[("status", Some(&status_text)), ("owner", owner_text.as_deref())],
            Some((&*rec, &st.checks)),
        )?;
        st.owner = owner;
        if rec.status == Status::New {
            super::queue::push(ws, rec)?;
        }
        Event::new("repair", "circe")
            .task(task)
            .with("what", what)
            .moved("?", rec.status.as_str(), rec.epoch)
            .append(&ws.store)?;
    } else {
        // `.owner` exists exactly while the task is held; a crash between the two record
        // writes leaves it behind or missing.
        let held = rec.status.is_owned();
        let stale = match (&st.owner, held) {
            (Some(own), true) => {
                rec.owner.as_deref() != Some(own.owner.as_str()) || own.epoch != rec.epoch
            }
            (None, true) | (Some(_), false) => true,
            (None, false) => false,
        };
        if stale {
            let fixed = if held {
                let (at, host, pid) =
                    st.owner.as_ref().map_or((now.clone(), super::host(), 0), |o| {
                        (o.claimed_at.clone(), o.host.clone(), o.pid)
                    });
                rec.owner_record(&at, &host, pid)
            } else {
                None
            };
            let text = fixed.as_ref().map(OwnerRecord::render);
            ws.store.write_records(task, &[("owner", text.as_deref())])?;
            st.owner = fixed;
        }
    }
    Ok(Some(st))
}

/// A handoff recorded its message's name but crashed before clearing it: finish it when the
/// message is in NEW_MESSAGES (the commit point was reached), else undo the mark.
fn finish_or_undo_handoff(ws: &Workspace, st: &mut TaskState, ticket: &str) -> Result<()> {
    use crate::message::{self, Mode};
    let task = st.rec.task_id.clone();
    let parsed = ws
        .store
        .has_message(&Mailbox::NewMessages, ticket)
        .then(|| ws.store.read_message(&Mailbox::NewMessages, ticket).ok())
        .flatten()
        .and_then(|b| message::parse_bytes(&b, Mode::Draft).ok());
    let handoff = parsed.and_then(|m| {
        let intent = m.intent.clone()?;
        let spec = ws.registry.intent(&intent)?;
        Some(super::open::Handoff {
            ticket: ticket.to_string(),
            to: m.to_agent()?.to_string(),
            priority: m.priority.map_or("normal", |p| p.as_str()).to_string(),
            required_checks: spec.required_checks.clone(),
            intent,
        })
    });
    match handoff {
        Some(h) if st.rec.status.is_owned() => {
            let by = st.rec.owner.clone().unwrap_or_else(|| "circe".into());
            super::open::finish_handoff(ws, st, &h, &by, true)
        }
        _ => {
            st.rec.handoff = None;
            let status = st.rec.render();
            super::board::write(
                ws,
                &task,
                &[("status", Some(&status))],
                Some((&st.rec, &st.checks)),
            )?;
            Event::new("repair", "circe")
                .task(&task)
                .with("what", "handoff never delivered; mark removed")
                .append(&ws.store)
        }
    }
}
