//! `circe release`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::Result;

/// Give a task back to the queue: its message returns to NEW_MESSAGES and the owner is
/// cleared. The owner may release; a coordinator may with --force (also to requeue a
/// parked task).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer release AUTH-012 --reason \"blocked on the DB schema\"\n  circe --agent coordinator release AUTH-012 --force --reason \"requeue\""
)]
pub struct ReleaseArgs {
    /// The task id (as `circe tasks` lists it), e.g. AUTH-012.
    pub task: String,
    /// Why (recorded in the record and the event log).
    #[arg(long)]
    pub reason: Option<String>,
    /// A coordinator taking back a task it does not hold (anyone else: refused, exit 3).
    #[arg(long)]
    pub force: bool,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
}

pub fn run(ctx: &Ctx, a: &ReleaseArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    let (rec, already) =
        crate::ops::release(&ws, &me, &task, a.reason.as_deref(), a.force, a.epoch)
            .map_err(|e| e.about_task(task.as_str()))?;
    let human = if already {
        format!("{} is waiting to be claimed already: nobody holds it\n", rec.task_id)
    } else {
        format!("released {} (epoch {}): waiting to be claimed\n", rec.task_id, rec.epoch)
    };
    Ok(Report::new(human, super::vocab::TaskMoved::new(rec, already)))
}
