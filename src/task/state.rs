//! Loading a task and reconciling its records with where its message lies.
//!
//! The message's box is the truth (one rename is each step's commit point); the records
//! follow. When they disagree, a command crashed between its rename and its record write,
//! and `reconcile` finishes that command's work (roll forward) or, for a send that never
//! delivered its message, undoes it (roll back).

use super::event::Event;
use super::lifecycle::{Actor, Move, Status, decide};
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
    let mut order = Vec::new();
    if let Some(o) = owner {
        order.push(Mailbox::Inbox(o.to_string()));
        order.push(Mailbox::Workspace(o.to_string()));
    }
    order.push(Mailbox::NewMessages);
    order.push(Mailbox::Logs);
    for a in ws.agents.keys() {
        if Some(a.as_str()) != owner {
            order.push(Mailbox::Inbox(a.clone()));
            order.push(Mailbox::Workspace(a.clone()));
        }
    }
    order.into_iter().find(|b| ws.store.has_message(b, name))
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
    let now = clock::format(clock::now());
    let rec = &mut st.rec;
    let fix: Option<&str> = match (&st.location, rec.status) {
        // A send that wrote the record but crashed before delivering: undo it.
        (None, Status::New) if rec.attempts == 0 => {
            ws.store.write_records(task, &[("status", None), ("owner", None), ("checks", None)])?;
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
            rec.lease_expires_at = Some(clock::format(
                clock::now() + chrono::Duration::from_std(lease).unwrap_or_default(),
            ));
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
        // Handed off: the new ticket landed in NEW_MESSAGES but the records still name
        // the sender as owner (the handoff crashed between its rename and its records).
        (Some(Mailbox::Inbox(a) | Mailbox::Workspace(a)), s)
            if s.is_owned() && rec.owner.as_deref() == Some(a.as_str()) =>
        {
            match pending_handoff(ws, task, a, &rec.message)? {
                Some(h) => {
                    apply_handoff(ws, task, rec, &mut st.checks, h)?;
                    st.location = Some(Mailbox::NewMessages);
                    Some("handoff finished (its message was in NEW_MESSAGES)")
                }
                None => None,
            }
        }
        _ => None,
    };
    if let Some(what) = fix {
        rec.updated_at.clone_from(&now);
        let owner = rec.owner_record(&now, &super::host(), 0);
        let status_text = rec.render();
        let owner_text = owner.as_ref().map(OwnerRecord::render);
        ws.store.write_records(
            task,
            &[("status", Some(&status_text)), ("owner", owner_text.as_deref())],
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

/// Finish a crashed handoff on `rec` (written by the caller) and add its required checks.
fn apply_handoff(
    ws: &Workspace,
    task: &str,
    rec: &mut StatusRecord,
    checks: &mut Checks,
    h: Handoff,
) -> Result<()> {
    rec.status = decide(rec.status, Move::Handoff, &[Actor::Owner])?;
    rec.owner = None;
    rec.epoch += 1;
    rec.lease_expires_at = None;
    rec.intent = h.intent;
    rec.to = h.to;
    rec.priority = h.priority;
    rec.message = h.ticket;
    rec.note = None;
    let mut changed = false;
    for c in h.required_checks {
        if let std::collections::btree_map::Entry::Vacant(e) = checks.entry(c) {
            e.insert(false);
            changed = true;
        }
    }
    if changed {
        ws.store.write_records(task, &[("checks", Some(&record::render_checks(checks)))])?;
    }
    Ok(())
}

/// A handoff whose message was delivered but whose records were never written.
struct Handoff {
    ticket: String,
    intent: String,
    to: String,
    priority: String,
    required_checks: Vec<String>,
}

/// A task-opening message for `task` from its owner `owner` in NEW_MESSAGES that is not
/// the current ticket: only a crashed handoff leaves one (handoff delivers and records
/// under the task lock, which the caller holds).
fn pending_handoff(
    ws: &Workspace,
    task: &str,
    owner: &str,
    current: &str,
) -> Result<Option<Handoff>> {
    use crate::message::{self, Mode};
    for name in ws.store.list_box(&Mailbox::NewMessages)? {
        if name == current {
            continue;
        }
        let Some(f) = message::parse_file_name(&name) else { continue };
        if f.task_id.as_deref() != Some(task) || f.from != owner {
            continue;
        }
        let Ok(bytes) = ws.store.read_message(&Mailbox::NewMessages, &name) else { continue };
        let Ok(msg) = message::parse_bytes(&bytes, Mode::Draft) else { continue };
        let from = msg.from.as_deref().map(message::agent_of);
        let (Some(intent), Some(to)) = (msg.intent.clone(), msg.to_agent()) else { continue };
        let Some(spec) = ws.registry.intent(&intent) else { continue };
        if from != Some(owner) || msg.task_id.as_deref() != Some(task) || !spec.opens_task {
            continue;
        }
        return Ok(Some(Handoff {
            ticket: name,
            to: to.to_string(),
            priority: msg.priority.map_or("normal", |p| p.as_str()).to_string(),
            required_checks: spec.required_checks.clone(),
            intent,
        }));
    }
    Ok(None)
}
