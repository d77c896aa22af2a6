//! `circe show`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::boxes;
use crate::error::{Error, Result};
use crate::message;
use crate::store::Mailbox;
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
    if crate::names::check_task_id(&a.key).is_ok() {
        let st = {
            let _lock = ws.store.lock_task(&a.key)?;
            task::load_reconciled(&ws, &a.key)?
        };
        if let Some(st) = st {
            return show_task(&ws, &st);
        }
    }
    let found = boxes::find(&ws, &a.key)?;
    let Some(f) = found.first() else {
        return Err(Error::not_found(format!("no message or task `{}`", a.key))
            .hint("`circe inbox` and `circe tasks` list what exists"));
    };
    // At most the size limit is read and shown (a planted file may be huge).
    let limit = ws.config.limits.message_bytes;
    let c = ws.store.read_message_capped(&f.location, &f.file, limit)?;
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
    let boxes = ws.all_boxes();
    let mut msgs = Vec::new();
    human.push_str("messages\n");
    for b in &boxes {
        for name in ws.store.list_box(b)? {
            if message::parse_file_name(&name).and_then(|f| f.task_id).as_deref()
                != Some(id.as_str())
            {
                continue;
            }
            let m = boxes::read(ws, b, &name).ok();
            let intent = m.as_ref().and_then(|m| m.intent.clone()).unwrap_or_default();
            let from = m.as_ref().and_then(|m| m.from.clone()).unwrap_or_default();
            let current = if name == st.rec.message { " (task message)" } else { "" };
            human.push_str(&format!("  {:<22} {name}  {from} {intent}{current}\n", b.label()));
            msgs.push(json!({"box": b.label(), "file": name, "from": from, "intent": intent, "current": name == st.rec.message}));
        }
    }
    let events: Vec<serde_json::Value> = ws
        .store
        .read_events()?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("task").and_then(|t| t.as_str()) == Some(id.as_str()))
        .collect();
    human.push_str(&format!(
        "events: {} (circe log is the full trail: LOGS/events.jsonl)\n",
        events.len()
    ));
    Ok(Report::new(
        human,
        json!({"task": st.rec, "owner": st.owner, "checks": st.checks, "location": st.location.as_ref().map(Mailbox::label), "messages": msgs, "events": events}),
    ))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}
