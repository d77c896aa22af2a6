//! `circe status`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::task::Status;

/// Move a task you hold: in_progress, blocked, completed (only when every check in
/// TASKS/<id>.checks is true), failed, or new (= release).
#[derive(Debug, Args)]
pub struct StatusArgs {
    pub task: String,
    /// in_progress | blocked | completed | failed | new
    pub status: String,
    /// A short note kept in the record and the event log.
    #[arg(long)]
    pub note: Option<String>,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
}

pub fn run(ctx: &Ctx, a: &StatusArgs) -> Result<Report> {
    let target = Status::parse(&a.status).ok_or_else(|| {
        Error::usage(format!("unknown status `{}`", a.status))
            .hint("use in_progress, blocked, completed, failed or new")
    })?;
    let (ws, me, _) = ctx.acting()?;
    let rec = crate::ops::set_status(
        &ws,
        &me,
        &super::task_id(&a.task)?,
        target,
        a.note.as_deref(),
        a.epoch,
    )?;
    Ok(Report::new(
        format!("{} is {} (epoch {})\n", rec.task_id, rec.status.as_str(), rec.epoch),
        rec,
    ))
}
