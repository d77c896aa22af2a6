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
    /// A coordinator taking back a task it does not hold.
    #[arg(long)]
    pub force: bool,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
}

pub fn run(ctx: &Ctx, a: &ReleaseArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    // Released already (a release run again): nothing to do, as the same status again is.
    if let Some(st) = ws.engine.peek(&task)?
        && st.rec.status == crate::task::Status::New
    {
        let rec = st.rec;
        return Ok(Report::new(
            format!("{} is waiting to be claimed already: nobody holds it\n", rec.task_id),
            super::vocab::TaskMoved::new(rec, true),
        ));
    }
    let rec = crate::ops::release(&ws, &me, &task, a.reason.as_deref(), a.force, a.epoch)?;
    Ok(Report::new(
        format!("released {} (epoch {}): waiting to be claimed\n", rec.task_id, rec.epoch),
        super::vocab::TaskMoved::new(rec, false),
    ))
}
