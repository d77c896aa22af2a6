//! `circe reap`.

use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;

use super::{Ctx, Report};
use crate::error::Result;

/// Return every task whose lease ran out to the queue, or park it after too many
/// attempts. Safe to run from cron at any interval.
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
    let done = crate::ops::reap(&ws, &by)?;
    let mut human = String::new();
    for (t, s) in &done {
        human.push_str(&format!("{t}: lease ran out -> {}\n", s.as_str()));
    }
    if done.is_empty() {
        human.push_str("no expired leases\n");
    }
    let reaped = done.iter().map(|(t, s)| Reaped { task_id: t.to_string(), status: *s }).collect();
    Ok(Report::new(human, ReapJson { reaped }))
}
