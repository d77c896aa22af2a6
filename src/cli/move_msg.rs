//! `circe take` and `circe done`: INBOX -> WORKSPACE -> LOGS.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::vocab::BoxFile;
use super::{Ctx, Report};
use crate::boxes::Mailbox;
use crate::error::Result;
use crate::ops;

/// Start working on a message: move it from your INBOX to your WORKSPACE.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer take AUTH-012\n  circe --agent engineer take 3e5xhztb"
)]
pub struct TakeArgs {
    /// A task id (its message), a msg_id, or a file name.
    pub key: String,
}

/// Finish with a message: move it from your INBOX or WORKSPACE into LOGS (the permanent
/// record). A task's message waits until the task is completed or failed.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent qa done AUTH-012             # every message of the task in your boxes\n  circe --agent engineer done 3e5xhztb       # one message"
)]
pub struct DoneArgs {
    /// A task id (its message), a msg_id, or a file name.
    pub key: String,
}

/// `circe take --json`: where the message is now.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeJson {
    #[serde(rename = "box")]
    pub mailbox: String,
    pub file: String,
    /// It was in your WORKSPACE already (`take` run again): nothing moved.
    pub already: bool,
    /// The message's id (a task's: its message's); null when it has none.
    pub msg_id: Option<String>,
}

/// `circe done --json`: every message filed into LOGS.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DoneJson {
    pub moved: Vec<BoxFile>,
    /// It was all in LOGS already (`done` run again): nothing moved.
    pub already: bool,
}

pub fn run_take(ctx: &Ctx, a: &TakeArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let (to, file, already, msg_id) = ops::take(&ws, &me, &a.key)?;
    if already {
        let human = format!("{file} is in {to} already: nothing to take\n");
        return Ok(Report::new(human, TakeJson { mailbox: to, file, already, msg_id }));
    }
    let seen = ops::seq::handed_on(&ws, &me, &[(Mailbox::Workspace(me.clone()), file.clone())]);
    Ok(Report::new(format!("{file} -> {to}\n"), TakeJson { mailbox: to, file, already, msg_id })
        .warnings(not_seen(&me, seen)))
}

pub fn run_done(ctx: &Ctx, a: &DoneArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let moved = ops::done(&ws, &me, &a.key)?;
    let filed: Vec<_> = moved.iter().map(|(_, f)| (Mailbox::Logs, f.clone())).collect();
    let seen = ops::seq::handed_on(&ws, &me, &filed);
    let already = moved.is_empty();
    let human: String = if already {
        format!("{} is in LOGS already: nothing to file\n", a.key)
    } else {
        moved.iter().map(|(to, file)| format!("{file} -> {to}\n")).collect()
    };
    let moved = moved.into_iter().map(|(mailbox, file)| BoxFile { mailbox, file }).collect();
    Ok(Report::new(human, DoneJson { moved, already }).warnings(not_seen(&me, seen)))
}

/// The move is done whatever happens to lastSeen: a failure to record it is a warning
/// (the message may show as new again, never hidden). Unread messages it made stale are
/// said too: they will not wake a `wait` or a `watch` of this agent.
pub(super) fn not_seen(me: &crate::names::AgentName, r: Result<usize>) -> Vec<String> {
    match r {
        Ok(0) => Vec::new(),
        Ok(n) => vec![format!(
            "{n} unread message{} in your INBOX {} stale now: numbered below one you handed on from the same sender (`circe --agent {me} inbox` lists {} under `stale`)",
            if n == 1 { "" } else { "s" },
            if n == 1 { "is" } else { "are" },
            if n == 1 { "it" } else { "them" },
        )],
        Err(e) => vec![format!("lastSeen not moved: {}", e.chain())],
    }
}
