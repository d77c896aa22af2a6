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
        }
    }
    // Oldest first: file names begin with the creation time, but sort by the header.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&x, &y| rows[x][0].cmp(&rows[y][0]).then(rows[x][6].cmp(&rows[y][6])));
    let rows: Vec<Vec<String>> = order.iter().map(|&i| rows[i].clone()).collect();
    let list: Vec<serde_json::Value> = order.iter().map(|&i| list[i].clone()).collect();
    let human = if rows.is_empty() {
        format!("{me}: inbox empty\n")
    } else {
        table(&["CREATED", "FROM", "INTENT", "PRI", "TASK", "BOX", "FILE"], &rows)
    };
    Ok(Report::new(human, json!({"agent": me, "messages": list})).warnings(warnings))
}
