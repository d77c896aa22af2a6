//! Loading a task and reconciling its records with where its message lies.
//!
//! The message's box is the truth (one rename is each step's commit point); the records
//! follow. When they disagree, a command crashed between its rename and its record write,
//! and `reconcile` finishes that command's work (roll forward) or, for a send that never
//! delivered its message, undoes it (roll back). Headers are the truth about which message is
//! a task's: a ticket renamed by hand is found by its `task_id` header and kept, and records
//! are never removed while any message in the root names the task.

use super::LocalEngine;
use super::board;
use super::lock::Lock;
use super::root::Store;
use super::task_journal::{Leaves, Roll};
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::event::{CIRCE, Event, EventKind};
use crate::message::{self, Mode};
use crate::names::{AgentName, TaskId};
use crate::task::record::{self, Checks, OwnerRecord, StatusRecord};
use crate::task::{Status, TaskState};

/// Where message `name` lies: the owner's boxes first, then the shared ones, then every
/// agent's.
pub(super) fn locate(eng: &LocalEngine, owner: Option<&AgentName>, name: &str) -> Option<Mailbox> {
    let store = &eng.store;
    let mut first = Vec::with_capacity(4);
    if let Some(o) = owner {
        first.push(Mailbox::Inbox(o.clone()));
        first.push(Mailbox::Workspace(o.clone()));
    }
    first.push(Mailbox::NewMessages);
    first.push(Mailbox::Logs);
    if let Some(b) = first.into_iter().find(|b| store.has_message(b, name)) {
        return Some(b);
    }
    // Only a crashed claim or a hand-moved file puts it anywhere else.
    store
        .list_agents()
        .unwrap_or_default()
        .into_iter()
        .filter(|(a, _)| Some(a) != owner)
        .flat_map(|(a, _)| [Mailbox::Inbox(a.clone()), Mailbox::Workspace(a)])
        .find(|b| store.has_message(b, name))
}

/// Read a task's records as they are. `None` when it has no `.status`.
pub(super) fn load(eng: &LocalEngine, task: &TaskId) -> Result<Option<TaskState>> {
    let store = &eng.store;
    let Some(text) = store.read_record(task, "status")? else {
        return Ok(None);
    };
    let rec = StatusRecord::parse(task, &text)?;
    let owner = store.read_record(task, "owner")?.and_then(|t| OwnerRecord::parse(&t));
    let checks = read_checks(eng, task)?;
    let location = locate(eng, rec.owner.as_ref(), &rec.message);
    Ok(Some(TaskState { rec, owner, checks, location }))
}

/// A task's `.checks` as they are (none: no checks).
fn read_checks(eng: &LocalEngine, task: &TaskId) -> Result<Checks> {
    match eng.store.read_record(task, "checks")? {
        Some(t) => record::parse_checks(task, &t),
        None => Ok(Checks::new()),
    }
}

fn repair_event(task: &TaskId, what: String) -> Event {
    let mut e = Event::now(EventKind::Repair, CIRCE).task(task);
    e.what = Some(what);
    e
}

/// Write a repair's records (`write`) and log its `events`, the events kept in the task's
/// lock file in between (`task_journal.rs`): a kill between the two leaves them to the next
/// holder of the lock, which logs them when the records are the repair's (`after`, whole;
/// `None`: removed).
fn logged_repair(
    eng: &LocalEngine,
    lock: &Lock,
    after: Option<&StatusRecord>,
    events: &mut [Event],
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let leaves = Leaves {
        record: after,
        exact: true,
        checks: None,
        ticket_in: None,
        before: None,
        renames: false,
    };
    let kept = eng.store.journal_task(lock, &leaves, events, Vec::new())?;
    write()?;
    super::event_log::append(&eng.store, events)?;
    if kept {
        Store::drop_task_journal(lock);
    }
    Ok(())
}

/// Write the status (and `.owner` as it follows from it) of a repaired task, keep the board in
/// step, requeue it when it is waiting, and log the repair.
fn save_repair(
    eng: &LocalEngine,
    lock: &Lock,
    st: &mut TaskState,
    from: Status,
    what: &str,
) -> Result<()> {
    let now = clock::stamp(clock::now());
    let rec = &mut st.rec;
    rec.updated_at.clone_from(&now);
    let owner = rec.owner_record(&now, &super::host_name(), 0);
    let status_text = rec.render();
    let owner_text = owner.as_ref().map(OwnerRecord::render);
    let mut ev = repair_event(&rec.task_id, what.to_string());
    ev = ev.moved(Some(from), rec.status, rec.epoch);
    let rec = &*rec;
    logged_repair(eng, lock, Some(rec), &mut [ev], || {
        // Queued before the records, as a change is (`lanes.rs`).
        if rec.status == Status::New {
            super::lanes::push(eng, rec)?;
        }
        board::write(
            eng,
            &rec.task_id,
            &[("status", Some(&status_text)), ("owner", owner_text.as_deref())],
            Some((rec, &st.checks)),
        )
    })?;
    st.owner = owner;
    Ok(())
}

/// The record left beside a task's `.status` removed by hand, if it was: a held task's
/// `.owner`, or a `.checks` while a message in a live box (not LOGS) names the task (circe
/// removes `.status` last; a lone `.checks` and no such message is what an older circe's
/// cut-off send left, and is written over).
pub(super) fn left_without_status(eng: &LocalEngine, task: &TaskId) -> Option<&'static str> {
    ["owner", "checks"].into_iter().find(|k| {
        eng.store.has_record(task, k)
            && (*k == "owner" || messages_in(eng, task, false).map_or(true, |m| !m.is_empty()))
    })
}

/// Messages that name `task` in their `task_id` header, other than under file names that say
/// another task (circe's names carry the header's task id): (box, file, parsed message).
fn messages_naming(
    eng: &LocalEngine,
    task: &TaskId,
) -> Result<Vec<(Mailbox, String, message::Message)>> {
    messages_in(eng, task, true)
}

/// `messages_naming`, in LOGS too when `logs`.
fn messages_in(
    eng: &LocalEngine,
    task: &TaskId,
    logs: bool,
) -> Result<Vec<(Mailbox, String, message::Message)>> {
    let mut out = Vec::new();
    let mut boxes = vec![Mailbox::NewMessages];
    if logs {
        boxes.push(Mailbox::Logs);
    }
    for (a, _) in eng.store.list_agents()? {
        boxes.push(Mailbox::Inbox(a.clone()));
        boxes.push(Mailbox::Workspace(a));
    }
    for b in boxes {
        for name in eng.store.list_box(&b)? {
            let by_name = message::parse_file_name(&name).and_then(|f| f.task_id);
            if by_name.as_deref().is_some_and(|t| t != task.as_str()) {
                continue;
            }
            let Ok(bytes) = eng.store.read_message(&b, &name) else { continue };
            let Ok(m) = message::parse_bytes(&bytes, Mode::Draft) else { continue };
            if m.task_id.as_deref() == Some(task.as_str()) {
                out.push((b.clone(), name, m));
            }
        }
    }
    Ok(out)
}

/// The newest message naming the task with the task's intent: its ticket under another name.
fn renamed_ticket(eng: &LocalEngine, st: &TaskState) -> Result<Option<(Mailbox, String)>> {
    let named = messages_naming(eng, &st.rec.task_id)?;
    Ok(named
        .into_iter()
        .filter(|(_, _, m)| m.intent.as_deref() == Some(st.rec.intent.as_str()))
        .max_by(|a, b| a.2.created_at.cmp(&b.2.created_at).then(a.1.cmp(&b.1)))
        .map(|(b, name, _)| (b, name)))
}

/// A send that wrote the record of a waiting task but crashed before delivering: no message
/// names the task, hidden names included (one that does is a person's to look at).
fn never_delivered(eng: &LocalEngine, st: &TaskState) -> Result<bool> {
    let task = &st.rec.task_id;
    Ok(st.rec.status == Status::New
        && st.rec.attempts == 0
        && messages_naming(eng, task)?.is_empty()
        && eng.store.hidden_message_of(task.as_str(), &st.rec.message)?.is_none())
}

/// A claim whose records were not written: the message lies in the box of `a`, who does
/// not hold the task and may, and no other agent's lease on it still runs.
fn claimed_by_move(eng: &LocalEngine, rec: &StatusRecord, a: &AgentName) -> bool {
    rec.owner.as_ref() != Some(a)
        && (rec.status == Status::New || rec.status.is_owned() || rec.status == Status::Parked)
        && no_claim(eng, rec, a).is_none()
}

/// Why a message in `a`'s box (moved there by hand) is no claim by `a`, when the task's
/// record is one a claim could leave behind: `a` may not take the task, or another agent's
/// lease on it still runs. `None`: it may be a claim cut off (`claimed_by_move`).
pub(super) fn no_claim(eng: &LocalEngine, rec: &StatusRecord, a: &AgentName) -> Option<String> {
    if !eng.may_hold(a, rec) {
        return Some(format!("{a} may not take it: `{}` addressed to {}", rec.intent, rec.to));
    }
    let until = lease_running(rec)?;
    let owner = rec.owner.as_ref().map_or("its owner", AgentName::as_str);
    Some(format!("{owner}'s lease runs until {until}, and a takeover waits for it to run out"))
}

/// When the task is held on a lease that has not run out: when it runs out. A ticket of
/// such a task in another agent's box is no takeover cut off (a takeover moves the ticket
/// only once the lease ran out, and the record cannot be renewed after the move: the owner's
/// next command would finish the takeover first), so a person moved it.
fn lease_running(rec: &StatusRecord) -> Option<&str> {
    let until = rec.lease_expires_at.as_deref().filter(|_| rec.status.is_owned())?;
    clock::parse(until).is_some_and(|t| t > clock::now()).then_some(until)
}

/// Whether reconciling the task (`reconcile`: what `doctor --repair` does to it) mends a
/// message that is not where its record says: a claim or a release finished, a renamed
/// ticket adopted, a send that never delivered undone. Anything else is a person's to mend.
/// Read only; a box that cannot be read counts as not mended.
pub(super) fn would_mend(eng: &LocalEngine, st: &TaskState) -> bool {
    match &st.location {
        None if st.rec.status.is_terminal() => false,
        None => {
            renamed_ticket(eng, st).ok().flatten().is_some()
                || never_delivered(eng, st).unwrap_or(false)
        }
        Some(Mailbox::Inbox(a) | Mailbox::Workspace(a)) => claimed_by_move(eng, &st.rec, a),
        Some(Mailbox::NewMessages) => st.rec.status.is_owned(),
        Some(_) => false,
    }
}

/// The ticket is in no box under its recorded name: look for it by its headers (a person or
/// an editor renamed it). Returns whether it was found and adopted.
fn find_renamed_ticket(eng: &LocalEngine, lock: &Lock, st: &mut TaskState) -> Result<bool> {
    let Some((b, name)) = renamed_ticket(eng, st)? else { return Ok(false) };
    let what = format!("ticket {} found renamed to {} in {}", st.rec.message, name, b.label());
    st.rec.message = name;
    st.location = Some(b);
    let from = st.rec.status;
    save_repair(eng, lock, st, from, &what)?;
    Ok(true)
}

/// Load `task`, settle the events a change cut off left unlogged (`task_journal.rs`) and
/// make its records agree with its message's box: what every command does on entry. Call
/// under the task lock (`lock`). `None` when the task does not exist.
pub(super) fn settled(eng: &LocalEngine, task: &TaskId, lock: &Lock) -> Result<Option<TaskState>> {
    settled_finishing(eng, task, lock).map(|(st, _)| st)
}

/// `settled`, and whether it finished a change a command cut off (its journal's records
/// rolled forward, or its events logged late).
pub(super) fn settled_finishing(
    eng: &LocalEngine,
    task: &TaskId,
    lock: &Lock,
) -> Result<(Option<TaskState>, bool)> {
    let mut st = load(eng, task)?;
    let mut rolled = false;
    let roll = &mut |work: Roll<'_>| {
        rolled = true;
        match work {
            Roll::Checks(checks) => roll_checks(eng, task, st.as_ref(), checks),
            Roll::Records { status, checks } => roll_records(eng, task, status, checks),
        }
    };
    let found = eng.store.settle_task_journal(lock, st.as_ref(), roll)?;
    let finished = rolled || matches!(found, Some(super::journal::Settled::Logged(_)));
    if rolled {
        st = load(eng, task)?;
    }
    let st = match st {
        Some(st) => reconcile(eng, lock, st)?,
        None => None,
    };
    Ok((st, finished))
}

/// Write the `.checks` a change wrote after its `.status` (`settled`).
fn roll_checks(
    eng: &LocalEngine,
    task: &TaskId,
    st: Option<&TaskState>,
    checks: &str,
) -> Result<()> {
    match st.map(|s| (&s.rec, record::parse_checks(task.as_str(), checks))) {
        Some((rec, Ok(c))) => board::write(eng, task, &[("checks", Some(checks))], Some((rec, &c))),
        _ => Ok(()),
    }
}

/// Write the records of a change cut off right after its ticket's rename (`settled`): its
/// `.status` (`status`, outbox and all, delivered by reconciling next), `.owner` as it
/// follows, and its `.checks` when it writes them. Queued first when it leaves the task
/// waiting, as the change itself was.
fn roll_records(
    eng: &LocalEngine,
    task: &TaskId,
    status: &str,
    checks: Option<&str>,
) -> Result<()> {
    let rec = StatusRecord::parse(task, status)?;
    let all = match checks {
        Some(c) => record::parse_checks(task.as_str(), c)?,
        None => read_checks(eng, task)?,
    };
    let owner = rec.owner_record(&rec.updated_at, &super::host_name(), 0);
    let owner_text = owner.as_ref().map(OwnerRecord::render);
    if rec.status == Status::New {
        super::lanes::push(eng, &rec)?;
    }
    let mut files = vec![("status", Some(status)), ("owner", owner_text.as_deref())];
    if checks.is_some() {
        files.push(("checks", checks));
    }
    board::write(eng, task, &files, Some((&rec, &all)))
}

/// Make the records agree with the message's box. Call under the task lock. Returns `None`
/// when the task does not exist (or its send never committed).
pub(super) fn reconcile(
    eng: &LocalEngine,
    lock: &Lock,
    mut st: TaskState,
) -> Result<Option<TaskState>> {
    if crate::fault::test_break("no-reconcile") {
        return Ok(Some(st));
    }
    let task = st.rec.task_id.clone();
    if let Some(ticket) = st.rec.handoff.clone() {
        finish_or_undo_handoff(eng, lock, &mut st, &ticket)?;
    }
    if !st.rec.outbox.is_empty() && !crate::fault::test_break("no-outbox") {
        finish_outbox(eng, lock, &mut st)?;
    }
    if st.location.is_none()
        && !st.rec.status.is_terminal()
        && !find_renamed_ticket(eng, lock, &mut st)?
    {
        // A send that wrote the record but crashed before delivering: undo it, unless some
        // message still names the task, hidden names included (then a person must look:
        // doctor reports it).
        if never_delivered(eng, &st)? {
            let mut ev = [repair_event(&task, "send never delivered; record removed".into())];
            logged_repair(eng, lock, None, &mut ev, || {
                // `.status` last: no task is seen without it while another record is
                // left (one that is, was removed by hand: `begin` refuses it).
                let gone = [("owner", None), ("checks", None), ("status", None)];
                board::write(eng, &task, &gone, None)
            })?;
            return Ok(None);
        }
        return Ok(Some(st));
    }
    let from = st.rec.status;
    let rec = &mut st.rec;
    let fix: Option<&str> = match (&st.location, rec.status) {
        // Claimed (or taken over after expiry) but the records were not written.
        (Some(Mailbox::Inbox(a) | Mailbox::Workspace(a)), _) if claimed_by_move(eng, rec, a) => {
            let now = clock::now();
            rec.owner = Some(a.clone());
            rec.status = Status::Claimed;
            rec.bump_epoch()?;
            rec.attempts = rec.attempts.saturating_add(1);
            rec.started_at.get_or_insert(clock::stamp(now));
            rec.lease_expires_at = Some(clock::lease_until(now, eng.settings.lease)?);
            Some("claim finished (message was in the agent's box)")
        }
        // Released (or expired, or handed off) but the records still name an owner.
        (Some(Mailbox::NewMessages), s) if s.is_owned() => {
            rec.owner = None;
            rec.status = Status::New;
            rec.bump_epoch()?;
            rec.lease_expires_at = None;
            Some("release finished (message was back in NEW_MESSAGES)")
        }
        _ => None,
    };
    if let Some(what) = fix {
        save_repair(eng, lock, &mut st, from, what)?;
        return Ok(Some(st));
    }
    // `.owner` exists exactly while the task is held; a crash between the two record writes
    // (or a power cut: its content is not fsynced) leaves it behind, missing or damaged.
    let held = rec.status.is_owned();
    let stale = match (&st.owner, held) {
        (Some(own), true) => rec.owner.as_ref() != Some(&own.owner) || own.epoch != rec.epoch,
        (None, true) | (Some(_), false) => true,
        (None, false) => false,
    };
    if stale {
        let fixed = if held {
            let now = clock::stamp(clock::now());
            let (at, host, pid) = st.owner.as_ref().map_or((now, super::host_name(), 0), |o| {
                (o.claimed_at.clone(), o.host.clone(), o.pid)
            });
            rec.owner_record(&at, &host, pid)
        } else {
            None
        };
        let text = fixed.as_ref().map(OwnerRecord::render);
        eng.store.write_records(&task, &[("owner", text.as_deref())])?;
        st.owner = fixed;
    }
    Ok(Some(st))
}

/// A change committed with messages to send, and crashed before all were delivered and the
/// outbox cleared: deliver what is missing (each once), then clear it.
fn finish_outbox(eng: &LocalEngine, lock: &Lock, st: &mut TaskState) -> Result<()> {
    let mut events = super::outbox::deliver(eng, &st.rec.outbox, true)?;
    let n = st.rec.outbox.len();
    st.rec.outbox.clear();
    st.rec.v = st.rec.format_needed();
    let status = st.rec.render();
    events.push(repair_event(&st.rec.task_id, format!("outbox finished ({n} messages sent once)")));
    let (rec, checks) = (&st.rec, &st.checks);
    logged_repair(eng, lock, Some(rec), &mut events, || {
        board::write(eng, &rec.task_id, &[("status", Some(&status))], Some((rec, checks)))
    })
}

/// A handoff recorded its message's name but crashed before clearing it: finish it when the
/// message is in NEW_MESSAGES (the commit point was reached), else undo the mark.
fn finish_or_undo_handoff(
    eng: &LocalEngine,
    lock: &Lock,
    st: &mut TaskState,
    ticket: &str,
) -> Result<()> {
    let store = &eng.store;
    let task = st.rec.task_id.clone();
    let parsed = store
        .has_message(&Mailbox::NewMessages, ticket)
        .then(|| store.read_message(&Mailbox::NewMessages, ticket).ok())
        .flatten()
        .and_then(|b| message::parse_bytes(&b, Mode::Draft).ok());
    let delivered = parsed.filter(|m| m.intent.is_some() && m.to_agent().is_some());
    if let (Some(m), true) = (delivered, st.rec.status.is_owned()) {
        let from = st.rec.status;
        let rec = &mut st.rec;
        rec.owner = None;
        rec.status = Status::New;
        rec.bump_epoch()?;
        rec.lease_expires_at = None;
        rec.note = None;
        rec.handoff = None;
        rec.intent = m.intent.clone().unwrap_or_default();
        rec.to = m.to_agent().unwrap_or_default().to_string();
        if let Some(p) = m.priority {
            rec.priority = p.as_str().to_string();
        }
        rec.message = ticket.to_string();
        // The new intent's checks are reset, as the handoff would have done. A record of
        // format 1 (an older circe's) names none: every check is reset (the new holder runs
        // them again), never kept passed for a task nobody has worked on.
        let mut reset = std::mem::take(&mut rec.handoff_checks);
        if rec.v < record::BASE_FORMAT && reset.is_empty() {
            reset =
                st.checks.iter().filter(|(_, passed)| **passed).map(|(k, _)| k.clone()).collect();
        }
        for c in &reset {
            rec.asserted.retain(|a| a != c);
            st.checks.insert(c.clone(), false);
        }
        st.location = Some(Mailbox::NewMessages);
        let checks = record::render_checks(&st.checks);
        board::write(eng, &task, &[("checks", Some(&checks))], Some((&st.rec, &st.checks)))?;
        let mut what = "handoff finished (its message was delivered)".to_string();
        if !reset.is_empty() {
            what.push_str(&format!("; checks reset: {}", reset.join(", ")));
        }
        return save_repair(eng, lock, st, from, &what);
    }
    st.rec.handoff = None;
    st.rec.handoff_checks.clear();
    let status = st.rec.render();
    let mut ev = [repair_event(&task, "handoff never delivered; mark removed".into())];
    let (rec, checks) = (&st.rec, &st.checks);
    logged_repair(eng, lock, Some(rec), &mut ev, || {
        board::write(eng, &task, &[("status", Some(&status))], Some((rec, checks)))
    })
}
