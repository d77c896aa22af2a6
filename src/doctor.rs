//! `circe doctor`: check every invariant of a root, and mend what a crash left.
//!
//! The invariants (PROTOCOLS.md "Invariants"):
//! 1. nothing is left in tmp/ (a staged file that never reached a box);
//! 2. boxes hold only regular `*.md` message files (no links, FIFOs, folders, strays), and
//!    circe's own files (TASKS/, locks/, LOGS/events.jsonl) are regular files;
//! 3. every message file parses, within the limits of circe.yaml;
//! 4. every task's message lies in exactly one box, and that box agrees with its status:
//!    new/parked -> NEW_MESSAGES, claimed/in_progress/blocked -> the owner's INBOX or
//!    WORKSPACE, completed/failed -> anywhere (LOGS once handled);
//! 5. `.owner` agrees with `.status`;
//! 6. every message in NEW_MESSAGES is the current message of its task.

use serde::Serialize;

use crate::error::Result;
use crate::message;
use crate::store::Mailbox;
use crate::task::{self, Status, StatusRecord};
use crate::workspace::Workspace;

#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub invariant: u8,
    pub what: String,
    pub repaired: bool,
}

/// Invariant 1: nothing left in tmp/ by a process that is gone. A committed fan-out batch
/// (`tmp/batch-<pid>-<id>/`) passed its commit point: repair delivers the copies it holds;
/// anything else never reached a box and is removed.
fn check_staging(ws: &Workspace, repair: bool, v: &mut dyn FnMut(u8, String, bool)) -> Result<()> {
    for name in ws.store.tmp_leftovers()? {
        let committed_batch = name.starts_with("batch-") && !name.contains(".part");
        if committed_batch {
            let what = if repair {
                let n = ws.store.finish_batch(&name)?.len();
                format!(
                    "tmp/{name}: a send to several boxes was interrupted after its commit point ({n} copies delivered)"
                )
            } else {
                format!(
                    "tmp/{name}: a send to several boxes was interrupted after its commit point"
                )
            };
            v(1, what, repair);
            continue;
        }
        if repair {
            ws.store.remove_leftover(&name)?;
        }
        v(1, format!("tmp/{name} was staged but never delivered"), repair);
    }
    Ok(())
}

/// Invariant 2 for circe's own files: strays in TASKS/, and links, FIFOs or folders where
/// circe keeps lock files or the event log. Returns the planted lock files left in place
/// (without `repair`): their tasks cannot be locked, so they are not checked further.
fn check_own_files(
    ws: &Workspace,
    repair: bool,
    v: &mut dyn FnMut(u8, String, bool),
) -> Result<Vec<String>> {
    for name in ws.store.task_strays()? {
        let dest = if repair { Some(ws.store.quarantine_task_file(&name)?) } else { None };
        let moved = dest.map(|d| format!(" (moved to {d})")).unwrap_or_default();
        v(2, format!("TASKS/{name} is not a task record{moved}"), repair);
    }
    let mut left = Vec::new();
    for rel in ws.store.planted_own_files()? {
        let dest = if repair { Some(ws.store.quarantine_own_file(&rel)?) } else { None };
        let moved = dest.map(|d| format!(" (moved to {d})")).unwrap_or_default();
        v(2, format!("{rel} is not a regular file{moved}"), repair);
        if !repair {
            left.push(rel);
        }
    }
    Ok(left)
}

/// Invariant 6: every message in NEW_MESSAGES is the current message of its task.
fn check_new_messages(
    ws: &Workspace,
    repair: bool,
    tickets: &std::collections::BTreeSet<String>,
    v: &mut dyn FnMut(u8, String, bool),
) -> Result<()> {
    for name in ws.store.list_box(&Mailbox::NewMessages)? {
        if !tickets.contains(&name) {
            // A handoff that failed after delivering its message: reconciling the task
            // finishes it (the message becomes the ticket).
            let fixed = repair
                && match message::parse_file_name(&name).and_then(|f| f.task_id) {
                    Some(id) if crate::names::check_task_id(&id).is_ok() => {
                        let _lock = ws.store.lock_task(&id)?;
                        task::load_reconciled(ws, &id)?;
                        task::load(ws, &id)?.is_some_and(|s| s.rec.message == name)
                    }
                    _ => false,
                };
            // Still no task's message (a copy or a hard link planted there): move it aside
            // for a person to look at; nothing is deleted.
            let moved = if repair && !fixed {
                format!(" (moved to {})", ws.store.quarantine(&Mailbox::NewMessages, &name)?)
            } else {
                String::new()
            };
            v(6, format!("NEW_MESSAGES/{name} is no task's current message{moved}"), repair);
        }
    }
    Ok(())
}

/// How many boxes hold each message file, every box listed once (not a `stat` per task and
/// box: at 100,000 tasks that was 2.6 million `statx` per doctor run).
fn copies_listed(
    ws: &Workspace,
    all: &[Mailbox],
) -> Result<std::collections::HashMap<String, usize>> {
    let mut listed = std::collections::HashMap::new();
    for b in all {
        for name in ws.store.list_box_regular(b)? {
            *listed.entry(name).or_insert(0) += 1;
        }
    }
    Ok(listed)
}

/// Check (and with `repair`, mend) the root. Returns what was found.
pub fn run(ws: &Workspace, repair: bool) -> Result<Vec<Violation>> {
    let _guard = ws.store.lock_named("doctor")?;
    let mut out = Vec::new();
    let mut v = |invariant: u8, what: String, repaired: bool| {
        out.push(Violation { invariant, what, repaired });
    };

    check_staging(ws, repair, &mut v)?;
    for b in ws.all_boxes() {
        for name in ws.store.list_foreign(&b)? {
            let dest = if repair { Some(ws.store.quarantine(&b, &name)?) } else { None };
            v(
                2,
                format!(
                    "{b}/{name} is not a message file{}",
                    dest.map(|d| format!(" (moved to {d})")).unwrap_or_default()
                ),
                repair,
            );
        }
        for name in ws.store.list_box(&b)? {
            let read = crate::boxes::read(ws, &b, &name);
            // Over a limit is too big, not broken: reported, and left for a person to
            // move or for a higher limit in circe.yaml (repair never moves it).
            if let Some(p) = read.as_ref().err().and_then(|p| p.iter().find(|p| p.limit.is_some()))
            {
                let what =
                    format!("{b}/{name}: {p} (repair leaves it: move it away, or raise the limit)");
                v(3, what, false);
                continue;
            }
            if read.is_err() {
                let dest = if repair { Some(ws.store.quarantine(&b, &name)?) } else { None };
                v(
                    3,
                    format!(
                        "{b}/{name} does not parse as a message{}",
                        dest.map(|d| format!(" (moved to {d})")).unwrap_or_default()
                    ),
                    repair,
                );
            }
        }
    }

    let planted = check_own_files(ws, repair, &mut v)?;

    let all = ws.all_boxes();
    let listed = copies_listed(ws, &all)?;
    let mut tickets = std::collections::BTreeSet::new();
    for id in ws.store.list_tasks()? {
        if planted.contains(&format!("locks/task-{id}.lock")) {
            continue; // reported above; its lock cannot be taken until it is moved away
        }
        let _lock = ws.store.lock_task(&id)?;
        let Some(st) = task::load(ws, &id).ok().flatten() else {
            v(4, format!("TASKS/{id}.status is damaged"), false);
            continue;
        };
        tickets.insert(st.rec.message.clone());
        // Listed in more than one box: checked again under the task's lock (a command may
        // have moved the message between two listings).
        let copies: Vec<&Mailbox> = if listed.get(&st.rec.message).is_some_and(|n| *n > 1) {
            all.iter().filter(|b| ws.store.has_message(b, &st.rec.message)).collect()
        } else {
            Vec::new()
        };
        if copies.len() > 1 {
            v(
                4,
                format!(
                    "task {id}: its message lies in {} boxes: {}",
                    copies.len(),
                    copies.iter().map(|b| b.label()).collect::<Vec<_>>().join(", ")
                ),
                false,
            );
        }
        if let Some(problem) = disagreement(&st) {
            let fixed = repair && {
                task::load_reconciled(ws, &id)?;
                task::load(ws, &id)?.is_none_or(|s| disagreement(&s).is_none())
            };
            v(4, format!("task {id}: {problem}"), fixed);
        } else if owner_mismatch(&st) {
            if repair {
                task::load_reconciled(ws, &id)?;
            }
            v(5, format!("task {id}: .owner does not match .status"), repair);
        }
    }
    check_new_messages(ws, repair, &tickets, &mut v)?;
    if repair {
        task::rebuild_queue(ws)?;
    }
    Ok(out)
}

fn disagreement(st: &task::TaskState) -> Option<String> {
    let r: &StatusRecord = &st.rec;
    match (&st.location, r.status) {
        (None, s) if s.is_terminal() => None,
        (None, Status::New) if r.attempts == 0 => {
            Some("its send never delivered the message".into())
        }
        (None, _) => {
            Some(format!("it is {} but its message {} is in no box", r.status.as_str(), r.message))
        }
        (Some(Mailbox::NewMessages), Status::New | Status::Parked) => None,
        (Some(b @ (Mailbox::Inbox(a) | Mailbox::Workspace(a))), s)
            if s.is_owned() || s.is_terminal() =>
        {
            (r.owner.as_deref() != Some(a.as_str()) && !s.is_terminal()).then(|| {
                format!(
                    "it is held by {} but its message is in {b}",
                    r.owner.as_deref().unwrap_or("nobody")
                )
            })
        }
        (Some(_), s) if s.is_terminal() => None,
        (Some(b), s) => Some(format!("it is {} but its message is in {b}", s.as_str())),
    }
}

/// `.owner` exists exactly while the task is held, and then matches `.status`.
fn owner_mismatch(st: &task::TaskState) -> bool {
    match (st.rec.status.is_owned(), &st.rec.owner, &st.owner) {
        (true, Some(a), Some(o)) => a != &o.owner || o.epoch != st.rec.epoch,
        (false, _, None) => false,
        _ => true,
    }
}
