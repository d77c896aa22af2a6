//! Finding a message by file name, message id or task id, and moving it along
//! INBOX -> WORKSPACE -> LOGS.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::message::{self, Message};
use crate::store::Mailbox;
use crate::task::{self, Status};
use crate::workspace::Workspace;

/// A message and where it lies.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    #[serde(skip)]
    pub location: Mailbox,
    pub message: Option<Message>,
}

/// Every message whose file name or msg_id is `key` (a msg_id prefix of 8+ characters
/// also matches), in all boxes.
pub fn find(ws: &Workspace, key: &str) -> Result<Vec<Found>> {
    find_in(ws, &ws.all_boxes(), key)
}

pub fn find_in(ws: &Workspace, boxes: &[Mailbox], key: &str) -> Result<Vec<Found>> {
    let mut out = Vec::new();
    for b in boxes {
        for name in ws.store.list_box(b)? {
            let by_name = name == key;
            let parsed = super::read(ws, b, &name).ok();
            let by_id = parsed
                .as_ref()
                .and_then(|m| m.msg_id.as_deref())
                .is_some_and(|id| id == key || (key.len() >= 8 && id.starts_with(key)));
            if by_name || by_id {
                out.push(Found {
                    mailbox: b.label(),
                    file: name,
                    location: b.clone(),
                    message: parsed,
                });
            }
        }
    }
    Ok(out)
}

/// The one message `key` names in `boxes`; a task id names the task's message.
fn one(
    ws: &Workspace,
    me: &str,
    boxes: &[Mailbox],
    key: &str,
) -> Result<(Mailbox, String, Option<task::StatusRecord>)> {
    if crate::names::check_task_id(key).is_ok() {
        let _lock = ws.store.lock_task(key)?;
        if let Some(st) = task::load_reconciled(ws, key)? {
            let loc = st.location.clone().ok_or_else(|| {
                Error::not_found(format!("the message of task {key} is in no box"))
            })?;
            if !boxes.contains(&loc) {
                return Err(Error::refused(format!(
                    "task {key}'s message is in {loc}, not in {me}'s boxes"
                )));
            }
            return Ok((loc, st.rec.message.clone(), Some(st.rec)));
        }
    }
    let mut found = find_in(ws, boxes, key)?;
    match found.len() {
        0 => Err(Error::not_found(format!(
            "no message `{key}` in {}",
            boxes.iter().map(Mailbox::label).collect::<Vec<_>>().join(", ")
        ))
        .hint(format!("`circe --agent {me} inbox` lists your messages"))),
        1 => {
            let f = found.remove(0);
            Ok((f.location, f.file, None))
        }
        n => Err(Error::usage(format!("`{key}` matches {n} messages"))
            .hint("give the full file name or message id")),
    }
}

/// INBOX -> WORKSPACE: `me` starts working on a message.
pub fn take(ws: &Workspace, me: &str, key: &str) -> Result<(String, String)> {
    let (from, name, rec) = one(ws, me, &[Mailbox::Inbox(me.to_string())], key)?;
    if let Some(r) = &rec
        && r.owner.as_deref() != Some(me)
    {
        return Err(Error::conflict(format!("task {} is not held by {me}", r.task_id)));
    }
    let to = Mailbox::Workspace(me.to_string());
    ws.store.move_message(&from, &to, &name)?;
    task::Event::new("take", me).with("file", name.as_str()).append(&ws.store)?;
    Ok((to.label(), name))
}

/// INBOX or WORKSPACE -> LOGS: `me` is done with a message. A task id files every message
/// of that task in `me`'s boxes; the task's current message waits until the task is
/// completed or failed.
pub fn done(ws: &Workspace, me: &str, key: &str) -> Result<Vec<(String, String)>> {
    let boxes = [Mailbox::Inbox(me.to_string()), Mailbox::Workspace(me.to_string())];
    let mut picked: Vec<(Mailbox, String)> = Vec::new();
    let mut rec = None;
    if crate::names::check_task_id(key).is_ok()
        && let Some(text) = ws.store.read_record(key, "status")?
    {
        rec = Some(task::StatusRecord::parse(key, &text)?);
        for b in &boxes {
            for name in ws.store.list_box(b)? {
                if message::parse_file_name(&name).and_then(|f| f.task_id).as_deref() == Some(key) {
                    picked.push((b.clone(), name));
                }
            }
        }
    }
    if rec.is_none() {
        let (b, name, _) = one(ws, me, &boxes, key)?;
        rec = current_ticket_of(ws, &name)?;
        picked.push((b, name));
    }
    if let Some(r) = &rec
        && !r.status.is_terminal()
    {
        let before = picked.len();
        picked.retain(|(_, n)| n != &r.message);
        if picked.is_empty() {
            let what = if before == 0 {
                format!("{me} has no message of task {}", r.task_id)
            } else {
                format!(
                    "task {} is {}: its message stays with its owner until it is completed or failed",
                    r.task_id,
                    r.status.as_str()
                )
            };
            return Err(Error::refused(what).hint(format!(
                "`circe status {} completed` first, or `circe release {}`",
                r.task_id, r.task_id
            )));
        }
    }
    if picked.is_empty() {
        return Err(Error::not_found(format!("{me} has no message `{key}`")));
    }
    let mut out = Vec::new();
    for (b, name) in picked {
        ws.store.move_message(&b, &Mailbox::Logs, &name)?;
        task::Event::new("done", me).with("file", name.as_str()).append(&ws.store)?;
        out.push((Mailbox::Logs.label(), name));
    }
    Ok(out)
}

/// The task whose current message is `name`, read from the file name's task id.
fn current_ticket_of(ws: &Workspace, name: &str) -> Result<Option<task::StatusRecord>> {
    let Some(task_id) = message::parse_file_name(name).and_then(|f| f.task_id) else {
        return Ok(None);
    };
    let Some(text) = ws.store.read_record(&task_id, "status")? else { return Ok(None) };
    let r = task::StatusRecord::parse(&task_id, &text)?;
    Ok((r.message == name).then_some(r).filter(|r| r.status != Status::New))
}
