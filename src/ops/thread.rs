//! Threads: messages joined by `in_reply_to`. A reply that names no task inherits the task of
//! the message it answers; `circe thread MSGID` prints the whole conversation as a tree.

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
    pub replies: Vec<Node>,
}

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

/// The whole conversation `key` (a msg id, or a unique prefix of 8+ characters) is part of,
/// from its first message.
pub fn thread(ws: &Workspace, key: &str) -> Result<Node> {
    super::find::empty_key(key)?;
    let all = every_message(ws)?;
    let hits: Vec<&String> = all
        .keys()
        .filter(|id| id.as_str() == key || (key.len() >= 8 && id.starts_with(key)))
        .collect();
    let start = match hits.as_slice() {
        [one] => (*one).clone(),
        [] => {
            return Err(Error::not_found(format!("no message with msg id `{key}`"))
                .hint("`circe --agent NAME inbox` lists an agent's messages with their msg ids, and `circe show TASK` a task's"));
        }
        many if many.iter().any(|id| id.as_str() == key) => key.to_string(),
        many => {
            return Err(Error::usage(format!("`{key}` matches {} messages", many.len()))
                .hint("give the whole msg id"));
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
    Ok(node(&all, &children, &root, &mut placed))
}

fn node(
    all: &BTreeMap<String, (Message, Mailbox, String)>,
    children: &BTreeMap<&str, Vec<&str>>,
    id: &str,
    placed: &mut HashSet<String>,
) -> Node {
    placed.insert(id.to_string());
    let (m, b, file) = &all[id];
    let mut kids: Vec<&str> = children
        .get(id)
        .map(|v| v.iter().copied().filter(|k| !placed.contains(*k)).collect())
        .unwrap_or_default();
    kids.sort_by_key(|k| (all[*k].0.created_at, (*k).to_string()));
    let mut replies = Vec::with_capacity(kids.len());
    for k in kids {
        if !placed.contains(k) {
            replies.push(node(all, children, k, placed));
        }
    }
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
        replies,
    }
}

/// The tree as text: one line per message, replies indented under what they answer.
pub fn render(root: &Node) -> String {
    let mut out = String::new();
    line(root, "", "", &mut out);
    out
}

fn line(n: &Node, lead: &str, rest: &str, out: &mut String) {
    let dash = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    out.push_str(&format!(
        "{lead}{}  {} -> {}  {}  {}  {}\n",
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
        line(r, &format!("{rest}{l}"), &format!("{rest}{r2}"), out);
    }
}
