//! `circe readdress`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::Result;
use crate::names::TaskId;
use crate::ops::orphans;

/// Address a waiting (or parked) task anew, as a coordinator: one sent to the wrong agent or
/// role, or meant for an agent who is away. Its message stays in NEW_MESSAGES; who may claim
/// it follows the new address. A held task is refused: put it back in the queue first (`circe release --force`).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent coordinator readdress AUTH-12 --to role:engineer\n  circe --agent coordinator readdress AUTH-12 --to agent:engineer-2 --reason \"engineer is away\""
)]
pub struct ReaddressArgs {
    /// The task.
    pub task: String,
    /// The new address: `role:NAME`, `agent:NAME`, `all`, or a bare NAME.
    #[arg(long)]
    pub to: String,
    /// Why (kept as the task's note and in the event).
    #[arg(long)]
    pub reason: Option<String>,
}

pub fn run(ctx: &Ctx, a: &ReaddressArgs) -> Result<Report> {
    let (ws, me, _) = ctx.acting()?;
    let task = TaskId::new(&a.task)?;
    let done = orphans::readdress_task(&ws, &me, &task, &a.to, a.reason.as_deref())
        .map_err(|e| e.about_task(task.as_str()))?;
    let human = if done.already {
        format!("task {task} is addressed to {} already: nothing changed\n", done.to)
    } else {
        format!("task {task} is now addressed to {}\n", done.to)
    };
    Ok(Report::new(human, done))
}
