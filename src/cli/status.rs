//! `circe status`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::{Error, Result};
use crate::message;
use crate::task::Status;

/// Move a task you hold: in_progress (start work), blocked, completed, failed, or new (=
/// release). The path is claimed -> in_progress -> completed: `completed` needs
/// `in_progress` first, and every check in TASKS/<id>.checks passed (`circe check`).
/// Asking for the status the task already has changes nothing and exits 0 ("already").
/// TX spellings work too: in-progress, complete and approved (= completed), rejected
/// (= failed).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe --agent engineer status AUTH-012 in_progress --note \"tests first\"\n  circe --agent engineer status AUTH-012 blocked --note \"waiting for the schema\"\n  circe --agent engineer status AUTH-012 completed"
)]
pub struct StatusArgs {
    /// The task id (as `circe tasks` lists it), e.g. AUTH-012.
    pub task: String,
    /// in_progress | blocked | completed | failed | new (or in-progress, complete,
    /// approved, rejected)
    pub status: String,
    /// A short note kept in the record and the event log.
    #[arg(long)]
    pub note: Option<String>,
    /// Fencing: refuse unless the task is still at this epoch.
    #[arg(long, env = "CIRCE_EPOCH")]
    pub epoch: Option<u64>,
}

/// The TX spellings `status_word` takes, for hints.
const TX_WORDS: &str = "TX spellings: in-progress, complete, approved, rejected";

/// A status word as `circe status` and `circe tasks --status` take it: circe's own
/// (`in_progress`, also `in-progress`) or a TX spelling that names a task status, by the
/// one TX table (`message::status::normalize`: `complete` and `approved` -> completed,
/// `rejected` -> failed). TX's `start` and `pending` are refused: it marks a new request, and as a move it
/// would read as "begin work" but mean "release". `hint` lists the words that make sense.
pub(super) fn status_word(word: &str, hint: &str) -> Result<Status> {
    if word == "start" || word == "pending" {
        return Err(Error::usage(format!(
            "`{word}` is TX's word for a new request, not a task status"
        ))
        .hint("to begin work say in_progress; to give the task back, new"));
    }
    message::status::normalize(word).map_or_else(|| Status::parse(word), Status::parse).ok_or_else(
        || Error::usage(format!("unknown status `{word}`")).hint(format!("{hint} ({TX_WORDS})")),
    )
}

pub fn run(ctx: &Ctx, a: &StatusArgs) -> Result<Report> {
    let target = status_word(&a.status, "use in_progress, blocked, completed, failed or new")?;
    let (ws, me, _) = ctx.acting()?;
    let task = super::task_id(&a.task)?;
    let (rec, already) =
        crate::ops::set_status_idempotent(&ws, &me, &task, target, a.note.as_deref(), a.epoch)
            .map_err(|e| e.about_task(task.as_str()))?;
    let human = if already {
        format!(
            "{} is already {} (epoch {}): nothing changed\n",
            rec.task_id,
            rec.status.as_str(),
            rec.epoch
        )
    } else {
        format!("{} is {} (epoch {})\n", rec.task_id, rec.status.as_str(), rec.epoch)
    };
    Ok(Report::new(human, super::vocab::TaskMoved::new(rec, already)))
}
