//! Threads: messages joined by `in_reply_to`. A reply that names no task inherits the task of
//! the message it answers; `circe thread KEY` prints the whole conversation as a tree.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::boxes::Mailbox;
use crate::clock;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::names::{MsgId, TaskId};
use crate::workspace::Workspace;

/// A reply's parent, as found here.
#[derive(Debug, Clone, Default)]
pub struct Parent {
    /// Its task: its ask's task, the task named after it, or its `task_id` header.
    pub task: Option<String>,
    /// Who sent it, when that is known (an ask's asker, a message's `from`).
    pub from: Option<String>,
    /// Its intent, when known.
    pub intent: Option<String>,
}

/// What message `id` (a reply's parent) is here: `None` when nothing here has that id (no
/// ask, task or message; the archive is not searched), else its task (its ask's task, the
/// task named after it, a TX `task` whose msg-id is its task id, or its `task_id` header)
/// and sender, looking in `first` boxes before the rest.
pub fn parent(ws: &Workspace, id: &str, first: &[Mailbox]) -> Result<Option<Parent>> {
    if let Ok(mid) = MsgId::new(id)
        && let Some(ask) = ws.engine.ask(&mid)?
    {
        return Ok(Some(Parent {
            task: ask.task.map(|t| t.to_string()),
            from: Some(ask.from.to_string()),
            intent: Some(ask.intent.clone()),
        }));
    }
    if let Ok(t) = TaskId::new(id)
        && let Some(st) = ws.engine.peek(&t)?
    {
        // A task named after its message (a TX `task`): sent by whoever opened it.
        return Ok(Some(Parent {
            task: Some(t.to_string()),
            from: Some(st.rec.opened_by.clone()),
            intent: Some(st.rec.intent.clone()),
        }));
    }
    let mut boxes: Vec<Mailbox> = first.to_vec();
    boxes.extend(ws.engine.boxes()?.into_iter().filter(|b| !first.contains(b)));
    for b in boxes {
        let found = super::find_in(ws, std::slice::from_ref(&b), id)?;
        if let Some(m) = found
            .iter()
            .filter_map(|f| f.message.as_ref())
            .find(|m| m.msg_id.as_deref() == Some(id))
        {
            return Ok(Some(Parent {
                task: m.task_id.clone(),
                from: m.from_agent().map(str::to_string),
                intent: m.intent.clone(),
            }));
        }
    }
    Ok(None)
}

/// One message of a thread, with its replies.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub msg_id: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub intent: Option<String>,
    pub task_id: Option<String>,
    pub status: Option<String>,
    pub created_at: Option<String>,
    pub summary: String,
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    /// The msg id it answers (`None` for the thread's first message): what places a reply
    /// listed below the deepest level.
    pub in_reply_to: Option<String>,
    pub replies: Vec<Node>,
}

/// How deep replies nest: below that, a message's whole subthread is listed under it,
/// flat, in thread order, each saying what it answers. Any agent can make a chain of
/// replies as long as it likes; nested without end, its tree would take a stack frame and
/// a level of indent per reply (a 10,000-reply chain was 150 MB of text).
pub const MAX_DEPTH: usize = 32;

/// What `inbox --oneline` shows of it (`seq::summary`: the headline, else the first line
/// of its `## Summary` section, else its first line that is not a heading), clipped.
fn summary(m: &Message) -> String {
    crate::message::clip(&super::seq::summary(m), 80)
}

/// Every message with a msg id, once (the first copy found), with where it lies.
fn every_message(ws: &Workspace) -> Result<BTreeMap<String, (Message, Mailbox, String)>> {
    let mut out = BTreeMap::new();
    for b in ws.engine.boxes()? {
        for name in ws.engine.list_box(&b)? {
            let Ok(m) = super::read(ws, &b, &name) else { continue };
            if let Some(id) = m.msg_id.clone() {
                out.entry(id).or_insert((m, b.clone(), name));
            }
        }
    }
    Ok(out)
}

/// The whole conversation `key` is part of, from its first message. `key` is what `circe
/// show` takes: an existing task's id (the thread of the task's first message in the boxes),
/// else a message's msg id, 8+ characters of its start or of its random end, or its file
/// name (`find`).
pub fn thread(ws: &Workspace, key: &str) -> Result<Node> {
    super::find::empty_key(key)?;
    let task = match TaskId::new(key) {
        Ok(t) => ws.engine.peek(&t)?.map(|st| (t, st.rec.message)),
        Err(_) => None,
    };
    let start = match &task {
        Some(_) => None,
        None => Some(message_start(ws, key)?),
    };
    let all = every_message(ws)?;
    let start = match (task, start) {
        (Some((t, ticket)), _) => task_start(&all, &t, &ticket)?,
        (None, Some(id)) if all.contains_key(&id) => id,
        (None, id) => {
            return Err(Error::conflict(format!(
                "message {} left the boxes while they were read",
                id.unwrap_or_default()
            ))
            .hint(format!("`circe show {key}` says where it is now")));
        }
    };
    // Up to the first message (a broken or circular chain stops where it stops).
    let mut root = start;
    let mut seen = HashSet::new();
    while seen.insert(root.clone()) {
        match all[&root].0.in_reply_to.as_ref().filter(|p| all.contains_key(*p)) {
            Some(p) => root.clone_from(p),
            None => break,
        }
    }
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, (m, _, _)) in &all {
        if let Some(p) = &m.in_reply_to {
            children.entry(p.as_str()).or_default().push(id.as_str());
        }
    }
    let mut placed = HashSet::new();
    Ok(node(&all, &children, &root, 0, &mut placed))
}

/// Where a task's thread starts: the message its id is the msg id of, else its first message
/// still in the boxes (by time), the one that opened it unless that was filed away (the
/// ticket counts as the task's too).
fn task_start(
    all: &BTreeMap<String, (Message, Mailbox, String)>,
    t: &TaskId,
    ticket: &str,
) -> Result<String> {
    // A message whose msg id is the task's id (a TX `task`) is meant by name.
    if all.contains_key(t.as_str()) {
        return Ok(t.to_string());
    }
    all.iter()
        .filter(|(_, (m, _, file))| m.task_id.as_deref() == Some(t.as_str()) || file == ticket)
        .min_by_key(|(id, (m, _, _))| (m.created_at, (*id).clone()))
        .map(|(id, _)| id.clone())
        .ok_or_else(|| {
            Error::not_found(format!("no message of task {t} is in the boxes"))
                .hint(format!("`circe show {t}` says where its messages are"))
        })
}

/// The msg id of the one message `key` names, found as `circe show` finds it.
fn message_start(ws: &Workspace, key: &str) -> Result<String> {
    let found = super::find(ws, key)?;
    if found.is_empty() {
        if let Ok(t) = TaskId::new(key)
            && ws.engine.archived_task(&t)?.is_some()
        {
            return Err(super::missing_task(ws, &t));
        }
        return Err(Error::not_found(format!("no message or task `{key}`")).hint(
            "`circe --agent NAME inbox` lists an agent's messages with their msg ids, `circe show TASK` a task's by file name; either names its thread, as a task id does",
        ));
    }
    let mut ids: Vec<String> = Vec::new();
    for id in found.iter().filter_map(|f| f.message.as_ref().and_then(|m| m.msg_id.clone())) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        // Found by its file name, and it carries no msg id (or does not read at all).
        let f = &found[0];
        let what = if f.message.is_some() { "has no msg id" } else { "does not read as a message" };
        return Err(Error::refused(format!("{} {} {what}: no thread joins it", f.mailbox, f.file))
            .hint(format!("`circe show {}` shows it as it is", f.file)));
    }
    // A whole msg id names its message even where it is also a part of another's.
    if let Some(exact) = ids.iter().find(|id| id.as_str() == key) {
        return Ok(exact.clone());
    }
    match ids.as_slice() {
        [one] => Ok(one.clone()),
        many => {
            let shown: Vec<&str> = many.iter().take(10).map(String::as_str).collect();
            Err(Error::usage(format!(
                "`{key}` matches {} messages: {}{}",
                many.len(),
                shown.join(", "),
                if many.len() > 10 { ", ..." } else { "" }
            ))
            .hint("give more of the id: its random end (8 characters after the `-`) is enough"))
        }
    }
}

/// Message `id`'s replies in time order, those not placed yet.
fn replies_of<'a>(
    all: &BTreeMap<String, (Message, Mailbox, String)>,
    children: &BTreeMap<&str, Vec<&'a str>>,
    id: &str,
    placed: &HashSet<String>,
) -> Vec<&'a str> {
    let mut kids: Vec<&str> = children
        .get(id)
        .map(|v| v.iter().copied().filter(|k| !placed.contains(*k)).collect())
        .unwrap_or_default();
    kids.sort_by_key(|k| (all[*k].0.created_at, (*k).to_string()));
    kids
}

/// Message `id` at `depth` with its replies: nested down to `MAX_DEPTH`, where the rest of
/// its subthread is listed flat (depth first, as the tree would have it), without recursion.
fn node(
    all: &BTreeMap<String, (Message, Mailbox, String)>,
    children: &BTreeMap<&str, Vec<&str>>,
    id: &str,
    depth: usize,
    placed: &mut HashSet<String>,
) -> Node {
    placed.insert(id.to_string());
    let mut replies = Vec::new();
    if depth < MAX_DEPTH {
        for k in replies_of(all, children, id, placed) {
            if !placed.contains(k) {
                replies.push(node(all, children, k, depth + 1, placed));
            }
        }
    } else {
        let mut stack: Vec<&str> = replies_of(all, children, id, placed);
        stack.reverse();
        while let Some(k) = stack.pop() {
            if !placed.insert(k.to_string()) {
                continue;
            }
            replies.push(leaf(all, k, Vec::new()));
            stack.extend(replies_of(all, children, k, placed).into_iter().rev());
        }
    }
    leaf(all, id, replies)
}

fn leaf(all: &BTreeMap<String, (Message, Mailbox, String)>, id: &str, replies: Vec<Node>) -> Node {
    let (m, b, file) = &all[id];
    Node {
        msg_id: id.to_string(),
        from: m.from.clone(),
        to: m.to.clone(),
        intent: m.intent.clone(),
        task_id: m.task_id.clone(),
        status: m.status.clone(),
        created_at: m.created_at.map(clock::format),
        summary: summary(m),
        mailbox: b.label(),
        file: file.clone(),
        in_reply_to: m.in_reply_to.clone(),
        replies,
    }
}

/// The tree as text: one line per message, replies indented under what they answer (a
/// reply listed below the deepest level says which message it answers).
pub fn render(root: &Node) -> String {
    let mut out = String::new();
    line(root, None, "", "", &mut out);
    out
}

fn line(n: &Node, parent: Option<&str>, lead: &str, rest: &str, out: &mut String) {
    let dash = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let re = match (&n.in_reply_to, parent) {
        (Some(r), Some(p)) if r != p => format!("  (re {r})"),
        _ => String::new(),
    };
    out.push_str(&format!(
        "{lead}{}  {} -> {}  {}  {}  {}{re}\n",
        n.msg_id,
        dash(&n.from),
        dash(&n.to),
        dash(&n.intent),
        dash(&n.created_at),
        n.summary
    ));
    for (i, r) in n.replies.iter().enumerate() {
        let last = i + 1 == n.replies.len();
        let (l, r2) = if last { ("└─ ", "   ") } else { ("├─ ", "│  ") };
        line(r, Some(&n.msg_id), &format!("{rest}{l}"), &format!("{rest}{r2}"), out);
    }
}
