//! `circe heartbeat`.

use clap::Args;

use super::{Ctx, Report, ttl};
use crate::error::Result;

/// Extend your lease on a task you hold (only the lease fields change).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer heartbeat AUTH-012\n  circe --agent engineer heartbeat AUTH-012 --ttl 2h"
)]
pub struct HeartbeatArgs {
    /// The task id (as `circe tasks` lists it), e.g. AUTH-012.
    pub task: String,
    /// Lease length from now (default from circe.yaml); a lease that runs longer already is
    /// kept: a heartbeat never cuts it short.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
}

pub fn run(ctx: &Ctx, a: &HeartbeatArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    let rec = crate::ops::heartbeat(&ws, &me, &task, ttl(a.ttl.as_deref())?, a.epoch)
        .map_err(|e| e.about_task(task.as_str()))?;
    Ok(Report::new(
        format!(
            "{} lease until {}\n",
            rec.task_id,
            rec.lease_expires_at.clone().unwrap_or_default()
        ),
        super::vocab::TaskMoved::new(rec, false),
    ))
}
