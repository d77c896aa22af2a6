//! The changes a task goes through outside the lifecycle's moves: opening it, recording a
//! check, a heartbeat. Like `effects::apply`, each returns the whole `Change` for the engine
//! to commit.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::effects::{Change, Ticket};
use super::lifecycle::Status;
use super::record::{Checks, StatusRecord};
use super::state::TaskState;
use crate::clock;
use crate::error::Result;
use crate::event::{Event, EventKind};
use crate::names::CheckName;

/// What a task message says about the task it opens.
pub struct OpenSpec {
    pub task_id: crate::names::TaskId,
    pub intent: String,
    pub to: String,
    pub priority: String,
    pub deadline: Option<String>,
    pub opened_by: String,
    pub required_checks: Vec<CheckName>,
    /// The message's file name and text: it becomes the ticket.
    pub name: String,
    pub content: Vec<u8>,
}

/// A new task: `new`, its required checks false, its message delivered to NEW_MESSAGES.
pub fn open(spec: OpenSpec, now: DateTime<Utc>) -> Change {
    let stamp = clock::stamp(now);
    let rec = StatusRecord {
        v: super::record::BASE_FORMAT,
        task_id: spec.task_id,
        status: Status::New,
        owner: None,
        started_at: None,
        updated_at: stamp.clone(),
        created_at: stamp,
        intent: spec.intent,
        priority: spec.priority,
        to: spec.to,
        opened_by: spec.opened_by,
        epoch: 0,
        attempts: 0,
        expiries: 0,
        message: spec.name.clone(),
        lease_expires_at: None,
        note: None,
        handoff: None,
        handoff_checks: Vec::new(),
        deadline: spec.deadline,
        outbox: Vec::new(),
        asserted: Vec::new(),
    };
    let checks: Checks = spec.required_checks.into_iter().map(|c| (c, false)).collect();
    let mut ev = Event::new(EventKind::Open, &rec.opened_by, clock::stamp_ms(now))
        .task(&rec.task_id)
        .moved(None, Status::New, 0)
        .file("new".into(), spec.name.clone());
    ev.intent = Some(rec.intent.clone());
    ev.addressed_to = Some(rec.to.clone());
    Change {
        op: "send",
        record: rec,
        checks: Some(checks),
        ticket: Ticket::Deliver { name: spec.name, content: spec.content },
        events: vec![ev],
        notices: Vec::new(),
        outbox: Vec::new(),
        request: None,
    }
}

/// A check result: `.checks` gets `name = passed` and the event says how it was decided.
pub fn record_check(st: &TaskState, name: &CheckName, passed: bool, ev: Event) -> Change {
    let mut checks = st.checks.clone();
    checks.insert(name.clone(), passed);
    let mut rec = st.rec.clone();
    rec.asserted.retain(|c| c != name);
    if passed && ev.how.as_deref() == Some("asserted") {
        rec.asserted.push(name.clone());
        rec.asserted.sort();
    }
    let mut ev = ev.task(&st.rec.task_id);
    ev.check = Some(name.to_string());
    ev.passed = Some(passed);
    Change {
        op: "check",
        record: rec,
        checks: Some(checks),
        ticket: Ticket::Stay,
        events: vec![ev],
        notices: Vec::new(),
        outbox: Vec::new(),
        request: None,
    }
}

/// A heartbeat: the lease runs `lease` from `now`; nothing else changes and nothing is logged.
pub fn heartbeat(st: &TaskState, now: DateTime<Utc>, lease: Duration) -> Result<Change> {
    let mut rec = st.rec.clone();
    // Extended, never cut short: a claim's longer `--ttl` outlives a heartbeat's shorter one.
    let runs = rec.lease_expires_at.as_deref().and_then(clock::parse);
    let end = clock::lease_end(now, lease)?;
    rec.lease_expires_at = Some(clock::stamp(runs.map_or(end, |r| r.max(end))));
    Ok(Change {
        op: "heartbeat",
        record: rec,
        checks: None,
        ticket: Ticket::Stay,
        events: Vec::new(),
        notices: Vec::new(),
        outbox: Vec::new(),
        request: None,
    })
}
