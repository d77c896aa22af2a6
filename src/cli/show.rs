//! `circe show`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::Cursor;
use crate::names::TaskId;
use crate::ops;
use crate::task;

/// Show one message (by msg_id or file name) with its headers and body, or a task (by
/// task id) with its records and every message that names it.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A msg_id, a message file name, or a task id.
    pub key: String,
}

pub fn run(ctx: &Ctx, a: &ShowArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    if let Ok(id) = TaskId::new(a.key.as_str()) {
        // The task's transaction: what a crashed command left is finished before showing it.
        let st = ws.engine.begin(&id, false)?.and_then(|tx| tx.state().cloned());
        if let Some(st) = st {
            return show_task(&ws, &st);
        }
        if let Some(b) = ws.engine.archived_bundle(&id)? {
            return Ok(super::archive_show::task(&b));
        }
    }
    let found = ops::find(&ws, &a.key)?;
    let Some(f) = found.first() else {
        if let Some(r) = super::archive_show::message(&ws, &a.key)? {
            return Ok(r);
        }
        return Err(Error::not_found(format!("no message or task `{}`", a.key))
            .hint("`circe inbox` and `circe tasks` list what exists; `circe archive search` looks in the archive"));
    };
    // At most the size limit is read and shown (a planted file may be huge).
    let limit = ws.config.limits.message_bytes;
    let c = ws.engine.read_message_capped(&f.location, &f.file, limit)?;
    let over = ws.config.limits.size_problem(c.size.unwrap_or(0), true);
    let shown = &c.bytes[..c.bytes.len().min(limit)];
    let text = String::from_utf8_lossy(shown).into_owned();
    let mut human = format!("{} {}\n", f.mailbox, f.file);
    if found.len() > 1 {
        human.push_str(&format!(
            "(also in: {})\n",
            found[1..].iter().map(|x| x.mailbox.clone()).collect::<Vec<_>>().join(", ")
        ));
    }
    human.push('\n');
    human.push_str(&text);
    let copies: Vec<_> = found.iter().map(|x| json!({"box": x.mailbox, "file": x.file})).collect();
    let warnings = over.map(|p| vec![format!("{p}: shown up to the limit")]).unwrap_or_default();
    Ok(Report::new(
        human,
        json!({"box": f.mailbox, "file": f.file, "copies": copies, "message": f.message, "text": text}),
    )
    .warnings(warnings))
}

fn show_task(ws: &crate::workspace::Workspace, st: &task::TaskState) -> Result<Report> {
    let id = &st.rec.task_id;
    let mut human = format!("task {id}\n\n.status\n{}\n", indent(&st.rec.render()));
    if let Some(o) = &st.owner {
        human.push_str(&format!(".owner\n{}\n", indent(&o.render())));
    }
    human.push_str(&format!(".checks\n{}\n", indent(&task::record::render_checks(&st.checks))));
    let boxes = ws.engine.boxes()?;
    let mut msgs = Vec::new();
    human.push_str("messages\n");
    for (b, name) in ops::messages_of(ws, id, &boxes)? {
        let m = ops::read(ws, &b, &name).ok();
        let intent = m.as_ref().and_then(|m| m.intent.clone()).unwrap_or_default();
        let from = m.as_ref().and_then(|m| m.from.clone()).unwrap_or_default();
        let current = if name == st.rec.message { " (task message)" } else { "" };
        human.push_str(&format!("  {:<22} {name}  {from} {intent}{current}\n", b.label()));
        msgs.push(json!({"box": b.label(), "file": name, "from": from, "intent": intent, "current": name == st.rec.message}));
    }
    let mut events = Vec::new();
    let mut at = Cursor::START;
    loop {
        let batch = ws.engine.read_events(at, 4096)?;
        let Some(last) = batch.last() else { break };
        at = Cursor::after(last.id);
        events.extend(batch.into_iter().filter(|e| e.task.as_ref() == Some(id)));
    }
    human.push_str(&format!("events: {} (the whole trail: LOGS/events.jsonl)\n", events.len()));
    Ok(Report::new(
        human,
        json!({"task": st.rec, "owner": st.owner, "checks": st.checks, "location": st.location.as_ref().map(Mailbox::label), "messages": msgs, "events": events}),
    ))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}
