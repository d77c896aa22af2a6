//! `circe show`: one message, or one task with its records, messages and events.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::schema_defs::{EventDef, MessageDef, OwnerRecordDef, StatusRecordDef};
use super::vocab::BoxFile;
use super::{Ctx, Report};
use crate::boxes::Mailbox;
use crate::error::{Error, Result};
use crate::event::{Cursor, Event};
use crate::names::TaskId;
use crate::ops;
use crate::task;

/// Show one message (by msg_id, 8+ characters of its start or of its random end, or file
/// name) with its headers and body, or a task (by task id) with its records, every message
/// that names it and its events. A key that matches several messages lists them (exit 2).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe show AUTH-012          # a task: records, messages, events\n  circe show 3e5xhztb          # a message, by its id's random part\n  circe show 20251121_170000_coordinator-all_implement-feature_AUTH-012.md"
)]
pub struct ShowArgs {
    /// A task id, a msg_id (or 8+ characters of its start or end), or a message file name.
    pub key: String,
}

/// `circe show --json`: a task, or a message.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ShowOutput {
    Task(Box<ShowTaskJson>),
    Message(Box<ShowMessageJson>),
    /// A task that was archived (section 17).
    ArchivedTask(Box<super::archive_json::ShowArchivedTaskJson>),
    /// A message found only in the archive.
    ArchivedMessage(Box<super::archive_json::ShowArchivedMessageJson>),
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowTaskJson {
    pub task_id: String,
    #[schemars(with = "StatusRecordDef")]
    pub task: task::StatusRecord,
    /// The `.owner` record while the task is held (`owner` names an agent everywhere, so
    /// the record is `owner_record`).
    #[schemars(with = "Option<OwnerRecordDef>")]
    pub owner_record: Option<task::OwnerRecord>,
    /// Each check and whether it passed (`task.asserted` names those asserted, not run).
    pub checks: std::collections::BTreeMap<String, bool>,
    /// The box the task's message lies in (`box`, as everywhere a message's place is said).
    #[serde(rename = "box")]
    pub location: Option<String>,
    pub messages: Vec<TaskMessage>,
    #[schemars(with = "Vec<EventDef>")]
    pub events: Vec<Event>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskMessage {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    /// Its id (null for a message without one): the key `circe show` and `circe thread` take.
    pub msg_id: Option<String>,
    pub from: String,
    pub intent: String,
    /// This is the task's current message (its ticket).
    pub current: bool,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowMessageJson {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    /// Every box holding a copy (a broadcast has one per recipient).
    pub copies: Vec<BoxFile>,
    #[schemars(with = "Option<MessageDef>")]
    pub message: Option<crate::message::Message>,
    /// The file's text, up to the size limit.
    pub text: String,
}

pub fn run(ctx: &Ctx, a: &ShowArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    if let Ok(id) = TaskId::new(a.key.as_str()) {
        // The task's transaction: what a crashed command left is finished before showing it.
        // A reader who may not write (a read-only root, a role that may only read) is shown
        // the task as its records stand.
        let st = match ws.engine.begin(&id, false) {
            Ok(tx) => tx.and_then(|tx| tx.state().cloned()),
            Err(e) if e.is_not_writable() => ws.engine.peek(&id)?,
            Err(e) => return Err(e),
        };
        if let Some(st) = st {
            return show_task(&ws, &st);
        }
        if let Some(b) = ws.engine.archived_bundle(&id)? {
            return Ok(super::archive_show::task(&b));
        }
        // Archived where this root cannot read it (a folder's archive, before it moved to a
        // database): said so, with where it lies.
        if !ws.engine.keeps_archive() && ws.engine.archived_task(&id)?.is_some() {
            return Err(ops::missing_task(&ws, &id));
        }
    }
    let mut found = ops::find(&ws, &a.key)?;
    // Copies of one name in several INBOXes: the acting agent's own one is meant.
    let mine = |f: &&ops::Found| {
        f.location.agent().map(crate::names::AgentName::as_str) == ctx.agent.as_deref()
    };
    if ctx.agent.is_some() && found.iter().filter(mine).count() == 1 {
        found.retain(|f| mine(&f));
    }
    let Some(f) = found.first() else {
        if let Some(r) = super::archive_show::message(&ws, &a.key)? {
            return Ok(r);
        }
        let archive = if ws.engine.keeps_archive() {
            "; `circe archive search` looks in the archive"
        } else {
            ""
        };
        // As the agent that asked, when one did (`inbox` needs one).
        let inbox = ctx.agent.as_deref().map_or_else(
            || "`circe --agent NAME inbox`".to_string(),
            |me| format!("`circe --agent {me} inbox`"),
        );
        return Err(Error::not_found(format!("no message or task `{}`", a.key))
            .hint(format!("{inbox} and `circe tasks` list what exists{archive}")));
    };
    // One key, several messages (not copies of one): say which, show none.
    let mut ids: Vec<String> = Vec::new();
    for x in &found {
        let id = x.message.as_ref().and_then(|m| m.msg_id.clone()).unwrap_or(x.file.clone());
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.len() > 1 {
        let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
        return Err(Error::usage(format!(
            "`{}` matches {} messages: {}{}",
            a.key,
            ids.len(),
            shown.join(", "),
            if ids.len() > 10 { ", ..." } else { "" }
        ))
        .hint("give more of the id: its random end (8 characters after the `-`) is enough"));
    }
    // At most the size limit is read and shown (a planted file may be huge).
    let limit = ws.config.limits.message_bytes;
    let c = ws.engine.read_message_capped(&f.location, &f.file, limit)?;
    let over = ws.config.limits.size_problem(c.size.unwrap_or(0), true);
    let shown = &c.bytes[..c.bytes.len().min(limit)];
    let text = String::from_utf8_lossy(shown).into_owned();
    let mut human = format!("{} {}\n", f.mailbox, f.file);
    if found.len() > 1 {
        human.push_str(&format!(
            "(copies also in: {})\n",
            found[1..].iter().map(|x| x.mailbox.clone()).collect::<Vec<_>>().join(", ")
        ));
    }
    human.push('\n');
    human.push_str(&text);
    let copies = found
        .iter()
        .map(|x| BoxFile { mailbox: x.mailbox.clone(), file: x.file.clone() })
        .collect();
    let warnings = over.map(|p| vec![format!("{p}: shown up to the limit")]).unwrap_or_default();
    let out = ShowMessageJson {
        mailbox: f.mailbox.clone(),
        file: f.file.clone(),
        copies,
        message: f.message.clone(),
        text,
    };
    Ok(Report::new(human, ShowOutput::Message(Box::new(out))).warnings(warnings))
}

/// How many of a task's latest events its text shows (the JSON has them all).
const SHOWN_EVENTS: usize = 10;

fn show_task(ws: &crate::workspace::Workspace, st: &task::TaskState) -> Result<Report> {
    let id = &st.rec.task_id;
    // The checks its completion demands: those the registry requires now and `.checks`
    // does not list count as not passed (a finished task's stay as they were).
    let listed = st.checks.clone();
    let mut st = st.clone();
    if !st.rec.status.is_terminal() {
        ws.demand_checks(&mut st);
    }
    let st = &st;
    let mut human = format!("task {id}\n\n.status\n{}\n", indent(&st.rec.render()));
    if let Some(o) = &st.owner {
        human.push_str(&format!(".owner\n{}\n", indent(&o.render())));
    }
    let events = ws.engine.task_events(id, Cursor::START)?;
    let opened = events.iter().any(|e| e.event == crate::event::EventKind::Open);
    human.push_str(".checks\n");
    if st.checks.is_empty() {
        human.push_str("  (none)\n");
    }
    for (name, passed) in &st.checks {
        // Who recorded it, and when: the latest check event of that name, unless a handoff
        // that resets it came after.
        let last = events.iter().rev().find(|e| ops::proof::speaks_of(ws, e, name.as_str()));
        let by = last.map(|e| format!(" by {} at {}", e.agent, e.ts)).unwrap_or_default();
        let handed = last.is_some_and(|e| e.event == crate::event::EventKind::Handoff);
        // The record says asserted, or its check event does; without an event (the log was
        // archived, or an older circe logged it without an id) how it passed is not known.
        let asserted = st.rec.asserted.contains(name)
            || last.is_some_and(|e| e.how.as_deref() == Some("asserted"));
        // Passed in `.checks` while the log last says otherwise: edited by hand.
        let failed = last.is_some_and(|e| e.passed != Some(true));
        let how = match (passed, asserted) {
            (true, _) if failed && handed => {
                format!("  (but the handoff{by} reset it, as the registry reads now)")
            }
            (true, _) if failed => {
                format!("  (but its last check event{by} did not pass: .checks edited by hand?)")
            }
            (true, true) => format!("  (asserted{by}, not run)"),
            // The log holds the task's whole history, and no check event in it.
            (true, false) if last.is_none() && opened => {
                "  (but no check event records it: .checks edited by hand?)".to_string()
            }
            (true, false) if last.is_none() => {
                "  (run or asserted: its check event is not in the log)".to_string()
            }
            (true, false) => format!("  (run{by})"),
            (false, _) if !listed.contains_key(name) => {
                format!(
                    "  (required by intent {} now; .checks does not list it yet)",
                    st.rec.intent
                )
            }
            (false, _) if by.is_empty() => String::new(),
            (false, _) if handed => format!("  (reset by the handoff{by})"),
            (false, _) => format!("  (recorded{by})"),
        };
        human.push_str(&format!("  {name}: {passed}{how}\n"));
    }
    human.push('\n');
    let boxes = ws.engine.boxes()?;
    let mut msgs = Vec::new();
    human.push_str("messages\n");
    for (b, name) in ops::messages_of(ws, id, &boxes)? {
        let m = ops::read(ws, &b, &name).ok();
        let intent = m.as_ref().and_then(|m| m.intent.clone()).unwrap_or_default();
        let from = m.as_ref().and_then(|m| m.from.clone()).unwrap_or_default();
        let msg_id = m.as_ref().and_then(|m| m.msg_id.clone());
        let current = name == st.rec.message;
        let mark = if current { " (task message)" } else { "" };
        human.push_str(&format!("  {:<22} {name}  {from} {intent}{mark}\n", b.label()));
        msgs.push(TaskMessage { mailbox: b.label(), file: name, msg_id, from, intent, current });
    }
    human.push_str(&format!("\nevents: {}\n", events.len()));
    let skipped = events.len().saturating_sub(SHOWN_EVENTS);
    if skipped > 0 {
        human.push_str(&format!(
            "  ... {skipped} earlier (circe log --all --task {id} --limit {})\n",
            events.len()
        ));
    }
    for e in &events[skipped..] {
        human.push_str(&format!("  {}\n", crate::ops::stream::human_line(e)));
    }
    let out = ShowTaskJson {
        task_id: id.to_string(),
        task: st.rec.clone(),
        owner_record: st.owner.clone(),
        checks: st.checks.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        location: st.location.as_ref().map(Mailbox::label),
        messages: msgs,
        events,
    };
    Ok(Report::new(human, ShowOutput::Task(Box::new(out))))
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}
