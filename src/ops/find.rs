//! Finding a message by file name, message id or task id, and moving it along
//! INBOX -> WORKSPACE -> LOGS. A key the user typed is sorted out first: an existing task's
//! id names the task (whose ticket moves inside the task's transaction), anything else is
//! looked up as a file name or message id, and nothing is locked or created for a key that
//! names nothing.

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::engine::TaskTx;
use crate::error::{Error, Result};
use crate::event::{Event, EventKind};
use crate::message::{self, Message, Mode};
use crate::names::{AgentName, TaskId};
use crate::task::{Change, Status, TaskState, Ticket};
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

/// Every message whose file name or msg_id is `key`, in all boxes. 8 or more characters of
/// a msg_id also match: its start (`20251121T1700`) or its end (the random part after the
/// `-`, `3e5xhztb`), so one key may match several messages (`show` lists them).
pub fn find(ws: &Workspace, key: &str) -> Result<Vec<Found>> {
    find_in(ws, &ws.engine.boxes()?, key)
}

pub fn find_in(ws: &Workspace, boxes: &[Mailbox], key: &str) -> Result<Vec<Found>> {
    empty_key(key)?;
    let listed: Vec<(&Mailbox, Vec<String>)> =
        boxes.iter().map(|b| Ok((b, ws.engine.list_box(b)?))).collect::<Result<_>>()?;
    // A key that is a message's file name names it, and only the messages by that name:
    // nothing else is read (a listing of the boxes, not a read of every message).
    if listed.iter().any(|(_, names)| names.iter().any(|n| n == key)) {
        let limit = ws.config.limits.message_bytes;
        let mut out = Vec::new();
        let mut unread = None;
        for (b, _) in listed.iter().filter(|(_, names)| names.iter().any(|n| n == key)) {
            let c = match ws.engine.read_message_capped(b, key, limit) {
                Ok(c) => c,
                Err(e) => {
                    unread.get_or_insert(e);
                    continue;
                }
            };
            let parsed =
                message::parse_limited(&c.bytes, c.size, Mode::Draft, &ws.config.limits).ok();
            out.push(Found {
                mailbox: b.label(),
                file: key.to_string(),
                location: (*b).clone(),
                message: parsed,
            });
        }
        // Named, and there, but not read (a FIFO, no permission): said as it is, not as
        // "no message". A planted entry's error says already what doctor does with it.
        if let (true, Some(e)) = (out.is_empty(), unread) {
            if e.details.iter().any(|(k, _)| *k == "planted") {
                return Err(e);
            }
            return Err(e.hint_more(
                "`circe doctor` says what lies there; `circe doctor --repair` moves what is no message file aside",
            ));
        }
        return Ok(out);
    }
    // A circe msg_id (or its start, to the hour at least) says the second its message was
    // named at: the names that start with it are read first, and only when none of them
    // holds the id is every other message read (a copy renamed by hand, a message whose id
    // was given to it later).
    if let Some(prefix) = message::name_stamp_of_id(key) {
        let first = by_id(ws, &listed, key, |n| n.starts_with(&prefix));
        if !first.is_empty() {
            return Ok(first);
        }
        return Ok(by_id(ws, &listed, key, |n| !n.starts_with(&prefix)));
    }
    Ok(by_id(ws, &listed, key, |_| true))
}

/// The messages among `listed` whose names pass `take` and whose msg_id is `key` (or, for
/// 8 or more characters, starts or ends with it).
fn by_id(
    ws: &Workspace,
    listed: &[(&Mailbox, Vec<String>)],
    key: &str,
    take: impl Fn(&str) -> bool,
) -> Vec<Found> {
    let mut out = Vec::new();
    for (b, names) in listed {
        for name in names.iter().filter(|n| take(n)) {
            let limit = ws.config.limits.message_bytes;
            let Ok(c) = ws.engine.read_message_capped(b, name, limit) else { continue };
            // Parse only what can match: the key's text must be in the file.
            if !contains(&c.bytes, key.as_bytes()) {
                continue;
            }
            let parsed =
                message::parse_limited(&c.bytes, c.size, Mode::Draft, &ws.config.limits).ok();
            let by_id = parsed.as_ref().and_then(|m| m.msg_id.as_deref()).is_some_and(|id| {
                id == key || (key.len() >= 8 && (id.starts_with(key) || id.ends_with(key)))
            });
            if by_id {
                out.push(Found {
                    mailbox: b.label(),
                    file: name.clone(),
                    location: (*b).clone(),
                    message: parsed,
                });
            }
        }
    }
    out
}

/// An empty key names nothing: refused as an empty name is (exit 3).
pub fn empty_key(key: &str) -> Result<()> {
    if key.trim().is_empty() {
        return Err(Error::refused("the key is empty")
            .hint("name a message (its id, 8+ characters of it, or its file name) or a task id"));
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// The existing task `key` names, if it names one (no lock is taken for anything else).
fn task_key<'a>(ws: &'a Workspace, key: &str) -> Result<Option<Box<dyn TaskTx + 'a>>> {
    match TaskId::new(key) {
        Ok(id) => ws.engine.begin(&id, false),
        Err(_) => Ok(None),
    }
}

/// The task whose ticket the message `m` (file `name`) is, if it is one.
fn ticket_of<'a>(
    ws: &'a Workspace,
    name: &str,
    m: Option<&Message>,
) -> Result<Option<Box<dyn TaskTx + 'a>>> {
    let by_header = m.and_then(|m| m.task_id.clone());
    let by_name = message::parse_file_name(name).and_then(|f| f.task_id);
    let Some(id) = by_header.or(by_name).and_then(|t| TaskId::new(t).ok()) else { return Ok(None) };
    let tx = ws.engine.begin(&id, false)?;
    Ok(tx.filter(|tx| tx.state().is_some_and(|s| s.rec.message == name)))
}

/// The one message `key` names in `boxes`.
fn one(ws: &Workspace, me: &AgentName, boxes: &[Mailbox], key: &str) -> Result<Found> {
    let found = find_in(ws, boxes, key)?;
    // An archived task's id names no message here: said as archived, not as nothing.
    if found.is_empty()
        && let Ok(t) = TaskId::new(key)
        && ws.engine.archived_task(&t)?.is_some()
    {
        return Err(super::missing_task(ws, &t));
    }
    only(found, me, boxes, key)
}

/// The one message `key` found in `boxes`: exit 5 for none, 2 for several.
fn only(mut found: Vec<Found>, me: &AgentName, boxes: &[Mailbox], key: &str) -> Result<Found> {
    match found.len() {
        0 => Err(Error::not_found(format!(
            "no message `{key}` in {}",
            boxes.iter().map(Mailbox::label).collect::<Vec<_>>().join(", ")
        ))
        .hint(format!("`circe --agent {me} inbox` lists your messages"))),
        1 => Ok(found.remove(0)),
        // Copies of one name in several INBOXes: the asking agent's own one is meant.
        _ if found.iter().filter(|f| f.location.agent() == Some(me)).count() == 1 => {
            let mine = found.iter().position(|f| f.location.agent() == Some(me)).unwrap_or(0);
            Ok(found.swap_remove(mine))
        }
        n => {
            let names: Vec<String> =
                found.iter().map(|f| format!("{}/{}", f.mailbox, f.file)).collect();
            Err(Error::usage(format!("`{key}` matches {n} messages: {}", names.join(", ")))
                .hint(several_hint(&found, key)))
        }
    }
}

/// What tells apart the messages `key` found: never the kind of key it is already (a whole
/// message id names every copy that has it; a whole file name every message so named).
fn several_hint(found: &[Found], key: &str) -> String {
    let id = |f: &Found| f.message.as_ref().and_then(|m| m.msg_id.clone());
    let first = &found[0];
    let names_differ = found.iter().any(|f| f.file != first.file);
    let ids_differ = found.iter().any(|f| id(f) != id(first));
    if names_differ && found.iter().all(|f| id(f).as_deref() == Some(key)) {
        return format!(
            "`{key}` is the whole message id of each (copies of one message): give one by its file name"
        );
    }
    if ids_differ && found.iter().all(|f| f.file == key) {
        return format!("`{key}` is the whole file name of each: give one by its message id");
    }
    "give the full file name or message id".to_string()
}

fn moved_event(
    kind: EventKind,
    me: &AgentName,
    task: Option<&TaskId>,
    to: &Mailbox,
    file: &str,
) -> Event {
    let mut ev = Event::now(kind, me).file(to.label(), file.to_string());
    if let Some(t) = task {
        ev = ev.task(t);
    }
    ev
}

/// Move a message that is no task's ticket from `from` to `to` (under a numbered name when
/// its own is taken there: two messages sent in one second by one sender to one receiver
/// with one intent share a name) and log the move's event, kept in a journal
/// across the move when the message has an id (a command cut off in between leaves the
/// event to the next settling). Returns the name used; `None` when it is gone from `from`.
fn move_plain(
    ws: &Workspace,
    (kind, me): (EventKind, &AgentName),
    (from, file): (&Mailbox, &str),
    to: &Mailbox,
    (task, msg_id): (Option<&TaskId>, Option<&str>),
) -> Result<Option<String>> {
    let event = |name: &str| moved_event(kind, me, task, to, name);
    let journal = match msg_id {
        Some(id) => ws.engine.journal_move(id, from, file, &event(file))?,
        None => None,
    };
    crate::fault::crash_point("move.journaled");
    let used = match ws.engine.file_message(from, to, file) {
        Ok(Some(used)) => used,
        other => {
            // Not moved by this command (another moved it, or it failed): its event is not
            // this command's to log, so its journal goes as if logged.
            if let Some(j) = &journal {
                let _ = ws.engine.close_journal(j, true);
            }
            return other;
        }
    };
    crate::fault::crash_point("move.logging");
    let logged = ws.engine.append_events(vec![event(&used)]);
    if let Some(j) = &journal {
        let _ = ws.engine.close_journal(j, logged.is_ok());
    }
    logged.map_err(Error::committed)?;
    Ok(Some(used))
}

/// Move a task's ticket inside its transaction.
fn move_ticket(
    tx: &mut dyn TaskTx,
    kind: EventKind,
    me: &AgentName,
    to: &Mailbox,
) -> Result<String> {
    let st = tx.state().cloned().ok_or_else(|| crate::engine::no_task(tx.task_id()))?;
    let ev = moved_event(kind, me, Some(&st.rec.task_id), to, &st.rec.message);
    let op = if kind == EventKind::Take { "take" } else { "done" };
    tx.commit(Change {
        op,
        record: st.rec.clone(),
        checks: None,
        ticket: Ticket::MoveTo(to.clone()),
        events: vec![ev],
        notices: Vec::new(),
        outbox: Vec::new(),
        request: None,
    })?;
    Ok(st.rec.message)
}

/// What `take` did: where the message is, its name, whether it was there already (`take`
/// run again: nothing moved), and its msg id (when it has one).
pub type Taken = (String, String, bool, Option<String>);

/// The msg id of a message `find` read.
fn id_of(f: &Found) -> Option<String> {
    f.message.as_ref().and_then(|m| m.msg_id.clone())
}

/// INBOX -> WORKSPACE: `me` starts working on a message (a task id: the task's message).
/// Run again, with the message in `me`'s WORKSPACE already, it moves nothing and says so.
pub fn take(ws: &Workspace, me: &AgentName, key: &str) -> Result<Taken> {
    let inbox = Mailbox::Inbox(me.clone());
    let to = Mailbox::Workspace(me.clone());
    let tx = if let Some(tx) = task_key(ws, key)? {
        tx
    } else {
        let f = match one(ws, me, std::slice::from_ref(&inbox), key) {
            Ok(f) => f,
            Err(e) if e.kind == crate::error::Kind::NotFound => {
                // Taken before: in the WORKSPACE already, the one message the key names there.
                match find_in(ws, std::slice::from_ref(&to), key)?.as_slice() {
                    [there] => return Ok((to.label(), there.file.clone(), true, id_of(there))),
                    _ => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let Some(tx) = ticket_of(ws, &f.file, f.message.as_ref())? else {
            // No task's ticket: a plain message moves on its own. A question's copy moves
            // holding the filing lock: `reap` files a last copy (telling its asker) under it.
            let question = f
                .message
                .as_ref()
                .is_some_and(|m| super::questions::moves_under_filing_lock(ws, m));
            let _filing = if question { Some(ws.engine.hold_filing()?) } else { None };
            let (task, id) = task_and_id(f.message.as_ref());
            let about = (task.as_ref(), id.as_deref());
            let Some(used) = move_plain(ws, (EventKind::Take, me), (&inbox, &f.file), &to, about)?
            else {
                return Err(Error::conflict(format!("{} left your INBOX meanwhile", f.file)).hint(
                    format!("another command moved it: `circe show {}` says where", f.file),
                ));
            };
            return Ok((to.label(), used, false, id));
        };
        tx
    };
    let task = tx.task_id().clone();
    // A refusal of the task's take names it (`details.task_id`), as the task's other
    // commands do, whichever key was typed.
    take_ticket(ws, me, tx, &inbox, &to).map_err(|e| e.about_task(task.as_str()))
}

/// `take` of a task's ticket, inside its transaction.
fn take_ticket(
    ws: &Workspace,
    me: &AgentName,
    mut tx: Box<dyn TaskTx + '_>,
    inbox: &Mailbox,
    to: &Mailbox,
) -> Result<Taken> {
    let st = tx.state().cloned().ok_or_else(|| crate::engine::no_task(tx.task_id()))?;
    if st.rec.status.is_terminal() {
        let t = &st.rec.task_id;
        return Err(Error::refused(format!(
            "task {t} is {}: there is nothing to take up",
            st.rec.status.as_str()
        ))
        .hint(format!(
            "`circe --agent {me} done {t}` files its messages from your boxes into LOGS"
        )));
    }
    if st.rec.owner.as_ref() != Some(me) || !st.rec.status.is_owned() {
        let what = format!("task {} is not held by {me}", st.rec.task_id);
        // Another holds it: a conflict (exit 4); nobody does: a rule, claim first (exit 3),
        // as `status` and `heartbeat` say it.
        return Err(match st.rec.owner.as_ref().filter(|_| st.rec.status.is_owned()) {
            Some(owner) => {
                let lease = st.rec.lease_expires_at.clone().unwrap_or_default();
                Error::conflict(what)
                    .detail("task_id", st.rec.task_id.to_string())
                    .detail("owner", owner.to_string())
                    .detail("lease_expires_at", lease.clone())
                    .hint(format!("{owner} holds it; its lease runs until {lease}"))
            }
            None if st.rec.status == Status::Parked => {
                Error::refused(what).hint(super::claim::parked_hint(ws, me, &st.rec.task_id))
            }
            None => Error::refused(what).hint(super::claim::claim_first(ws, me, &st.rec)),
        });
    }
    // The task's message, read where it lies (a message that does not read has no id here).
    let id = st
        .location
        .as_ref()
        .and_then(|b| super::read(ws, b, &st.rec.message).ok())
        .and_then(|m| m.msg_id);
    if st.location.as_ref() == Some(to) {
        return Ok((to.label(), st.rec.message.clone(), true, id));
    }
    if st.location.as_ref() != Some(inbox) {
        let t = &st.rec.task_id;
        return Err(Error::refused(format!(
            "task {t}'s message is in {}, not in your INBOX",
            st.location.as_ref().map_or("no box".into(), Mailbox::label)
        ))
        .hint(format!("`circe show {t}` says where it is")));
    }
    let file = move_ticket(tx.as_mut(), EventKind::Take, me, to)?;
    Ok((to.label(), file, false, id))
}

/// Messages of a task in `boxes`: named for it, or (for names that carry no task) saying so
/// in their `task_id` header.
pub fn messages_of(
    ws: &Workspace,
    task: &TaskId,
    boxes: &[Mailbox],
) -> Result<Vec<(Mailbox, String)>> {
    let mut out = Vec::new();
    for b in boxes {
        for name in ws.engine.list_box(b)? {
            let read_it = || {
                ws.engine
                    .read_message(b, &name)
                    .ok()
                    .and_then(|bytes| message::parse_bytes(&bytes, Mode::Draft).ok())
                    .is_some_and(|m| m.task_id.as_deref() == Some(task.as_str()))
            };
            let mine = match message::parse_file_name(&name).and_then(|f| f.task_id) {
                Some(t) if t == task.as_str() => true,
                // Another tool's name may split otherwise (an intent with `_`:
                // `..._test_results_AUTH-012.md`): one that holds the task's id is read.
                Some(_) => name.contains(task.as_str()) && read_it(),
                // Its name says it has no task: not read.
                None if message::says_no_task(&name) => false,
                None => read_it(),
            };
            if mine {
                out.push((b.clone(), name));
            }
        }
    }
    Ok(out)
}

/// INBOX or WORKSPACE -> LOGS: `me` is done with a message. A task id files every message of
/// that task in `me`'s boxes; the task's own message waits until the task is completed or
/// failed. A coordinator filing a finished task files its messages from every box (the
/// reference flow's last step: "archives all related messages to LOGS"). Empty when it is
/// all in LOGS already (`done` run again).
pub fn done(ws: &Workspace, me: &AgentName, key: &str) -> Result<Vec<(String, String)>> {
    let mine = [Mailbox::Inbox(me.clone()), Mailbox::Workspace(me.clone())];
    let Some(mut tx) = task_key(ws, key)? else {
        let found = find_in(ws, &mine, key)?;
        // Filed already, and it was `me`'s: sent by it, or to it.
        let mine_filed = |f: &Found| {
            f.message.as_ref().is_some_and(|m| {
                m.from_agent() == Some(me.as_str())
                    || m.to
                        .as_deref()
                        .is_some_and(|to| ws.reach(to).is_ok_and(|(agents, _)| agents.contains(me)))
            })
        };
        if found.is_empty() && find_in(ws, &[Mailbox::Logs], key)?.iter().any(mine_filed) {
            return Ok(Vec::new());
        }
        if found.is_empty()
            && let Ok(t) = TaskId::new(key)
            && ws.engine.archived_task(&t)?.is_some()
        {
            return Err(super::missing_task(ws, &t));
        }
        let f = only(found, me, &mine, key)?;
        if let Some(mut tx) = ticket_of(ws, &f.file, f.message.as_ref())? {
            let st = tx.state().cloned().ok_or_else(|| crate::engine::no_task(tx.task_id()))?;
            refuse_live_ticket(&st, me)?;
            let file = move_ticket(tx.as_mut(), EventKind::Done, me, &Mailbox::Logs)?;
            return Ok(vec![(Mailbox::Logs.label(), file)]);
        }
        let _held = match &f.message {
            Some(m) => super::questions::refuse_filing_unanswered(ws, me, key, &[m])?,
            None => None,
        };
        let used = file_plain(ws, me, &f.location, &f.file, f.message.as_ref())?;
        return Ok(vec![(Mailbox::Logs.label(), used)]);
    };
    let st = tx.state().cloned().ok_or_else(|| crate::engine::no_task(tx.task_id()))?;
    let everywhere = st.rec.status.is_terminal() && ws.is_coordinator(me);
    let boxes: Vec<Mailbox> = if everywhere {
        ws.engine.boxes()?.into_iter().filter(|b| *b != Mailbox::Logs).collect()
    } else {
        mine.to_vec()
    };
    let mut picked = messages_of(ws, &st.rec.task_id, &boxes)?;
    let ticket_here = st.location.as_ref().is_some_and(|l| boxes.contains(l));
    picked.retain(|(_, n)| *n != st.rec.message);
    let _held = if everywhere {
        None
    } else {
        let read: Vec<Message> =
            picked.iter().filter_map(|(b, name)| super::read(ws, b, name).ok()).collect();
        super::questions::refuse_filing_unanswered(ws, me, key, &read.iter().collect::<Vec<_>>())?
    };
    let mut out = Vec::new();
    let task = &st.rec.task_id;
    let all = picked.len() + usize::from(ticket_here && st.rec.status.is_terminal());
    if ticket_here {
        if st.rec.status.is_terminal() {
            let ticket = move_ticket(tx.as_mut(), EventKind::Done, me, &Mailbox::Logs)
                .map_err(|e| partly_filed(e, me, task, 0, all))?;
            out.push((Mailbox::Logs.label(), ticket));
        } else if picked.is_empty() {
            return Err(refuse_live_ticket(&st, me).unwrap_err());
        }
    }
    if picked.is_empty() && out.is_empty() {
        // The task's message is filed already, and the task was `me`'s (held, opened, or a
        // coordinator's to file).
        let was_mine = st.rec.owner.as_ref() == Some(me)
            || st.rec.opened_by == me.as_str()
            || ws.is_coordinator(me);
        if st.location == Some(Mailbox::Logs) && was_mine {
            return Ok(Vec::new());
        }
        return Err(Error::not_found(format!("{me} has no message of task {}", st.rec.task_id))
            .hint(format!("`circe show {}` says where its messages are", st.rec.task_id)));
    }
    for (b, name) in picked {
        match file_plain_named(ws, me, &b, &name, task) {
            Ok(Some(used)) => out.push((Mailbox::Logs.label(), used)),
            Ok(None) => {}
            Err(e) => return Err(partly_filed(e, me, task, out.len(), all)),
        }
    }
    Ok(out)
}

/// A `done TASK` cut off after `filed` of its `all` messages moved (the one it failed on may
/// stand too: `committed`): the error says how far it went and how to file the rest.
fn partly_filed(e: Error, me: &AgentName, task: &TaskId, filed: usize, all: usize) -> Error {
    let moved = filed + usize::from(e.is_committed());
    if moved == 0 || moved >= all {
        return e;
    }
    e.map_message(|m| format!("{m} ({moved} of task {task}'s {all} messages filed)"))
        .detail("filed_count", moved)
        .hint_more(format!("`circe --agent {me} done {task}` again files the rest"))
}

/// A task's own message stays with its holder until the task is finished.
fn refuse_live_ticket(st: &TaskState, me: &AgentName) -> Result<()> {
    if st.rec.status.is_terminal() {
        return Ok(());
    }
    let t = &st.rec.task_id;
    Err(Error::refused(format!(
        "task {t} is {}: its message stays with its owner until it is completed or failed",
        st.rec.status.as_str()
    ))
    .hint(match st.rec.status {
        Status::New | Status::Parked => format!("`circe show {t}` tells where it stands"),
        Status::InProgress => format!(
            "`circe --agent {me} status {t} completed` first, or `circe --agent {me} release {t}`"
        ),
        Status::Blocked => format!(
            "`circe --agent {me} status {t} in_progress`, then `completed`, first; or `circe --agent {me} release {t}`"
        ),
        _ => format!(
            "`circe --agent {me} status {t} in_progress`, then `circe --agent {me} status {t} completed`, first; or `circe --agent {me} release {t}`"
        ),
    }))
}

/// File a message that is no task's ticket.
pub(super) fn file_plain(
    ws: &Workspace,
    me: &AgentName,
    from: &Mailbox,
    file: &str,
    m: Option<&Message>,
) -> Result<String> {
    let (task, id) = task_and_id(m);
    let about = (task.as_ref(), id.as_deref());
    let Some(used) = move_plain(ws, (EventKind::Done, me), (from, file), &Mailbox::Logs, about)?
    else {
        return Err(Error::conflict(format!("{file} left {from} meanwhile"))
            .hint(format!("another command moved it: `circe show {file}` says where")));
    };
    Ok(used)
}

fn file_plain_named(
    ws: &Workspace,
    me: &AgentName,
    from: &Mailbox,
    file: &str,
    task: &TaskId,
) -> Result<Option<String>> {
    // Its id, for the journal of the move (a message that does not parse has none).
    let bytes = ws.engine.read_message(from, file).ok();
    let m = bytes.and_then(|b| message::parse_bytes(&b, Mode::Draft).ok());
    let id = m.and_then(|m| m.msg_id);
    // None: someone else filed it meanwhile.
    move_plain(ws, (EventKind::Done, me), (from, file), &Mailbox::Logs, (Some(task), id.as_deref()))
}

/// The task a message names and its msg id, each when it has one.
fn task_and_id(m: Option<&Message>) -> (Option<TaskId>, Option<String>) {
    let task = m.and_then(|m| m.task_id.clone()).and_then(|t| TaskId::new(t).ok());
    (task, m.and_then(|m| m.msg_id.clone()))
}

/// Is message `id` in the archive? (A reply may still answer it.)
pub fn in_archive(ws: &Workspace, id: &str) -> Result<bool> {
    Ok(archived(ws, id)?.is_some())
}

/// What the archive holds under `id`, as what a reply answers: its task, sender and intent.
pub fn archived(ws: &Workspace, id: &str) -> Result<Option<super::thread::Parent>> {
    if !ws.engine.keeps_archive() {
        return Ok(None);
    }
    let q = crate::archive::query::Query { id: Some(id.to_string()), ..Default::default() };
    let mut hit = None;
    // A segment that cannot be read is passed over here: `archive search` reports it.
    ws.engine.archive_search(&q, &mut |h| {
        let e = h.entry;
        hit = Some(super::thread::Parent { task: e.task, from: e.from, intent: e.intent });
        Ok(false)
    })?;
    Ok(hit)
}
