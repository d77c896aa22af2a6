//! `circe reap`.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::{Error, Result};

/// Return every task whose lease ran out to the queue, or park it after too many
/// attempts; expire tasks and asks whose deadline passed (the coordinators, or the asker,
/// are told) and file unread messages past their deadline into LOGS. Safe to run from cron
/// at any interval.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe reap                          # by hand\n  * * * * * cd /srv/team && circe reap   # from cron, every minute"
)]
pub struct ReapArgs {}

/// `circe reap --json`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReapJson {
    /// Every task whose lease had run out (its status now `new`, or `parked`) or whose
    /// deadline passed (`expired`).
    pub reaped: Vec<Reaped>,
    /// Asks whose deadline passed unanswered (their msg ids), now expired.
    pub asks_expired: Vec<String>,
    /// Unread messages past their deadline filed into LOGS: where each lay.
    pub messages_filed: Vec<super::vocab::BoxFile>,
}

#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reaped {
    pub task_id: String,
    #[schemars(with = "super::schema_defs::StatusDef")]
    pub status: crate::task::Status,
}

pub fn run(ctx: &Ctx, _a: &ReapArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let by = ctx.agent.clone().unwrap_or_else(|| crate::event::CIRCE.into());
    let (done, failed) = crate::ops::reap_all(&ws, &by)?;
    let lapsed = crate::ops::deadline::reap_messages(&ws)?;
    let mut human = String::new();
    for (t, s) in &done {
        let why =
            if *s == crate::task::Status::Expired { "deadline passed" } else { "lease ran out" };
        human.push_str(&format!("{t}: {why} -> {}\n", s.as_str()));
    }
    for a in &lapsed.asks {
        human.push_str(&format!("ask {a}: deadline passed unanswered -> expired\n"));
    }
    for (b, f) in &lapsed.filed {
        human.push_str(&format!("{b}/{f}: deadline passed unread -> logs\n"));
    }
    if done.is_empty() && lapsed.asks.is_empty() && lapsed.filed.is_empty() {
        human.push_str("no expired leases or deadlines\n");
    }
    if !failed.is_empty() || !lapsed.undone.is_empty() {
        return Err(partly(&human, done.len(), &failed, &lapsed.undone));
    }
    let reaped = done.iter().map(|(t, s)| Reaped { task_id: t.to_string(), status: *s }).collect();
    let messages_filed = lapsed
        .filed
        .into_iter()
        .map(|(mailbox, file)| super::vocab::BoxFile { mailbox, file })
        .collect();
    let out = ReapJson { reaped, asks_expired: lapsed.asks, messages_filed };
    Ok(Report::new(human, out))
}

/// A run that reaped some and not all: what was not done, and what was (cron mails it).
/// A task whose change was made but whose notice was not delivered is reaped (its change
/// stands): only its notice is said.
fn partly(
    human: &str,
    reaped: usize,
    failed: &[(crate::names::TaskId, Error)],
    undone: &[(String, String)],
) -> Error {
    // Each error with its cause (the OS error a failed write carries).
    let said = |t: &dyn std::fmt::Display, e: &Error| match std::error::Error::source(e) {
        Some(cause) => format!("{t}: {}: {cause}", e.message),
        None => format!("{t}: {}", e.message),
    };
    let not_done: Vec<String> = failed
        .iter()
        .filter(|(_, e)| !e.is_committed())
        .map(|(t, e)| said(t, e))
        .chain(undone.iter().map(|(what, why)| format!("{what}: {why}")))
        .collect();
    let outbox = |e: &Error| e.details.iter().any(|(k, v)| *k == "outbox" && *v == true);
    let committed = |unsent: bool| -> Vec<String> {
        let mine = failed.iter().filter(|(_, e)| e.is_committed() && outbox(e) == unsent);
        mine.map(|(t, e)| said(t, e)).collect()
    };
    let (untold, unfinished) = (committed(true), committed(false));
    let mut parts = Vec::new();
    if !not_done.is_empty() {
        parts.push(format!("{} could not be reaped: {}", not_done.len(), not_done.join("; ")));
    }
    if !untold.is_empty() {
        parts.push(format!(
            "{} task(s) were reaped, but their notice was not delivered (it waits in the task's outbox; the next `circe reap` or `circe doctor --repair` sends it once its box is mended): {}",
            untold.len(),
            untold.join("; ")
        ));
    }
    if !unfinished.is_empty() {
        parts.push(format!(
            "{} task(s) were reaped, but what follows the change failed (it stands; the next `circe reap` or `circe doctor --repair` finishes it once this is mended): {}",
            unfinished.len(),
            unfinished.join("; ")
        ));
    }
    let done = human.trim_end().replace('\n', "; ");
    let mut err = Error::internal(format!("{} (done: {done})", parts.join("; ")))
        .detail("reaped_count", reaped)
        .hint("mend what each names (`circe doctor` shows it); the next run reaps what was left");
    if !untold.is_empty() {
        err = err.detail("committed", true);
    }
    err
}
