//! `circe thread`.

use clap::Args;

use super::{Ctx, Report};
use crate::error::Result;
use crate::ops::thread;

/// A whole conversation as a tree: the one message KEY belongs to, from its first message down
/// through every reply (`in_reply_to`): who, to whom, intent, when, and a summary. KEY is what
/// `circe show` takes: a msg id (or 8+ characters of its start or random end), a message's
/// file name, or a task id (the thread of the task's first message).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  circe thread ask-001\n  circe thread 20261123T0723abcd --json\n  circe thread AUTH-012            # the thread of the task's first message"
)]
pub struct ThreadArgs {
    /// Any message of the thread: its msg id (or 8+ characters of its start or random end)
    /// or its file name; or a task id.
    #[arg(value_name = "KEY")]
    pub msg_id: String,
}

pub fn run(ctx: &Ctx, a: &ThreadArgs) -> Result<Report> {
    let ws = ctx.workspace()?;
    let root = thread::thread(&ws, &a.msg_id)?;
    Ok(Report::new(thread::render(&root), root))
}
