//! `circe inbox`.

use clap::Args;
use serde_json::json;

use super::output::table;
use super::{Ctx, Report};
use crate::boxes::Mailbox;
use crate::clock;
use crate::error::Result;
use crate::message;
use crate::ops;

/// What is waiting for the acting agent: its INBOX, oldest first.
#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Also list the WORKSPACE.
    #[arg(long)]
    pub workspace: bool,
    /// One line per message, `(ROLE #N): text`: the sender in upper case, its sequence
    /// number, and the message's headline or summary.
    #[arg(long)]
    pub oneline: bool,
}

pub fn run(ctx: &Ctx, a: &InboxArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let mut boxes = vec![Mailbox::Inbox(me.clone())];
    if a.workspace {
        boxes.push(Mailbox::Workspace(me.clone()));
    }
    let mut rows = Vec::new();
    let mut list = Vec::new();
    let mut warnings = Vec::new();
    let mut parsed_all: Vec<(Mailbox, String, Option<message::Message>)> = Vec::new();
    for b in &boxes {
        for name in ws.engine.list_box(b)? {
            // Within the root's limits: a huge or planted file is reported, not read whole.
            let read = ops::read(&ws, b, &name);
            let problem = read.as_ref().err().map(|p| ops::first_problem(p));
            if let Some(p) = &problem {
                warnings.push(format!("{}/{name}: {p}", b.label()));
            }
            let parsed = read.ok();
            // Absent: null in --json, `-` in the table.
            let get = |f: fn(&message::Message) -> Option<String>| parsed.as_ref().and_then(f);
            let created = get(|m| m.created_at.map(clock::format));
            let from = get(|m| m.from.clone());
            let intent = get(|m| m.intent.clone());
            let task = get(|m| m.task_id.clone());
            let msg_id = get(|m| m.msg_id.clone());
            let priority = get(|m| m.priority.map(|p| p.as_str().to_string()));
            let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
            rows.push(vec![
                cell(&created),
                cell(&from),
                cell(&intent),
                cell(&priority),
                cell(&task),
                b.label(),
                name.clone(),
            ]);
            list.push(json!({"box": b.label(), "file": name, "created_at": created, "from": from, "intent": intent, "task_id": task, "msg_id": msg_id, "priority": priority, "valid": parsed.is_some(), "problem": problem}));
            parsed_all.push((b.clone(), name.clone(), parsed));
        }
    }
    // Oldest first: file names begin with the creation time, but sort by the header.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&x, &y| rows[x][0].cmp(&rows[y][0]).then(rows[x][6].cmp(&rows[y][6])));
    let rows: Vec<Vec<String>> = order.iter().map(|&i| rows[i].clone()).collect();
    let mut list: Vec<serde_json::Value> = order.iter().map(|&i| list[i].clone()).collect();
    let parsed_all: Vec<_> = order.iter().map(|&i| parsed_all[i].clone()).collect();
    let stale = stale_marks(&ws, &me, &parsed_all)?;
    let (fresh, old) = split_stale(&rows, &mut list, &parsed_all, &stale);
    let header = ["CREATED", "FROM", "INTENT", "PRI", "TASK", "BOX", "FILE"];
    let human = if a.oneline {
        oneline(&me, &mut list, &parsed_all, &stale)
    } else if fresh.is_empty() && old.is_empty() {
        format!("{me}: inbox empty\n")
    } else {
        let mut h = if fresh.is_empty() { String::new() } else { table(&header, &fresh) };
        if !old.is_empty() {
            h.push_str(STALE_HEADING.trim_start_matches(|c| h.is_empty() && c == '\n'));
            h.push_str(&table(&header, &old));
        }
        h
    };
    let (messages, stale_list): (Vec<_>, Vec<_>) =
        list.into_iter().zip(&stale).partition(|(_, s)| s.is_none());
    let messages: Vec<_> = messages.into_iter().map(|(v, _)| v).collect();
    let stale_list: Vec<_> = stale_list.into_iter().map(|(v, _)| v).collect();
    Ok(Report::new(human, json!({"agent": me, "messages": messages, "stale": stale_list}))
        .warnings(warnings))
}

const STALE_HEADING: &str =
    "\nstale (numbered at or below what you last saw of the sender: not new, kept):\n";

/// For each INBOX message, `Some(lastSeen)` when it is stale (PROTOCOLS.md section 14);
/// WORKSPACE messages are being worked on and never stale.
fn stale_marks(
    ws: &crate::workspace::Workspace,
    me: &crate::names::AgentName,
    parsed: &[(Mailbox, String, Option<message::Message>)],
) -> Result<Vec<Option<u64>>> {
    let inbox: Vec<(&str, &message::Message)> = parsed
        .iter()
        .filter_map(|(b, f, m)| match (b, m) {
            (Mailbox::Inbox(_), Some(m)) => Some((f.as_str(), m)),
            _ => None,
        })
        .collect();
    // What arrived stale and was never logged is logged now (a listing is where it is met).
    if let Err(e) = ops::seq::log_stale(ws, me, &inbox) {
        eprintln!("warning: stale messages not logged: {}", e.chain());
    }
    let judge = ops::seq::Staleness::of(ws, me)?;
    Ok(parsed
        .iter()
        .map(|(b, _, m)| match (b, m) {
            (Mailbox::Inbox(_), Some(m)) => judge.stale(m),
            _ => None,
        })
        .collect())
}

/// The table rows split into (fresh, stale); stale messages' JSON gets `seq` and
/// `last_seen`.
fn split_stale(
    rows: &[Vec<String>],
    list: &mut [serde_json::Value],
    parsed: &[(Mailbox, String, Option<message::Message>)],
    stale: &[Option<u64>],
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let (mut fresh, mut old) = (Vec::new(), Vec::new());
    for (i, row) in rows.iter().enumerate() {
        match stale[i] {
            None => fresh.push(row.clone()),
            Some(seen) => {
                old.push(row.clone());
                list[i]["seq"] = json!(parsed[i].2.as_ref().and_then(|m| m.seq));
                list[i]["last_seen"] = json!(seen);
            }
        }
    }
    (fresh, old)
}

/// `--oneline`: `(ROLE #N): text` per message, the stale ones apart after the others; in
/// JSON each message gets its `line`.
fn oneline(
    me: &crate::names::AgentName,
    list: &mut [serde_json::Value],
    parsed: &[(Mailbox, String, Option<message::Message>)],
    stale: &[Option<u64>],
) -> String {
    let (mut fresh, mut old) = (String::new(), String::new());
    for (i, (_, _, m)) in parsed.iter().enumerate() {
        let Some(l) = m.as_ref().map(ops::seq::oneline) else { continue };
        list[i]["line"] = json!(l);
        let to = if stale[i].is_some() { &mut old } else { &mut fresh };
        to.push_str(&l);
        to.push('\n');
    }
    if fresh.is_empty() && old.is_empty() {
        return format!("{me}: inbox empty\n");
    }
    if !old.is_empty() {
        fresh.push_str(STALE_HEADING.trim_start_matches(|c| fresh.is_empty() && c == '\n'));
        fresh.push_str(&old);
    }
    fresh
}
