//! `circe reap`.

use clap::Args;
use serde_json::json;

use super::{Ctx, Report};
use crate::error::Result;

/// Return every task whose lease ran out to the queue, or park it after too many
/// attempts. Safe to run from cron at any interval.
#[derive(Debug, Args)]
pub struct ReapArgs {}

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
    let list: Vec<_> = done.iter().map(|(t, s)| json!({"task": t, "status": s})).collect();
    Ok(Report::new(human, json!({"reaped": list})))
}
