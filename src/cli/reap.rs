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
    /// Every task whose lease had run out, and its status now (new, or parked).
    pub reaped: Vec<Reaped>,
    /// Asks whose deadline passed unanswered (their msg ids), now expired.
    pub asks_expired: Vec<String>,
    /// Unread messages past their deadline filed into LOGS, as [box, file].
    pub messages_filed: Vec<(String, String)>,
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
    if !failed.is_empty() || !lapsed.unread.is_empty() {
        // The rest was reaped: say it with what could not be, so cron's mail tells both.
        let what: Vec<String> = failed
            .iter()
            .map(|(t, e)| format!("{t}: {}", e.message))
            .chain(lapsed.unread.iter().map(|(b, why)| format!("{b}: {why}")))
            .collect();
        let kept = human.trim_end().replace('\n', "; ");
        return Err(Error::internal(format!(
            "{} task(s) or box(es) could not be reaped: {} (done: {kept})",
            what.len(),
            what.join("; ")
        ))
        .detail("reaped", done.len().to_string())
        .hint("the others were reaped; mend what each names (`circe doctor` shows it) and the next run reaps the rest"));
    }
    let reaped = done.iter().map(|(t, s)| Reaped { task_id: t.to_string(), status: *s }).collect();
    let out = ReapJson { reaped, asks_expired: lapsed.asks, messages_filed: lapsed.filed };
    Ok(Report::new(human, out))
}
